import ChimeMQTT
import Testing
