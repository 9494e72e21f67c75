import ChimeCore
import ChimeJournal
import ChimeMQTT
