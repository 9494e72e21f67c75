#ifndef CHIME_CMOSQUITTO_SHIM_H
#define CHIME_CMOSQUITTO_SHIM_H

#include <mosquitto.h>
#include <mqtt_protocol.h>

#endif
