import ChimeMQTT
