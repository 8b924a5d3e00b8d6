// Package config holds the settings of outboxd serve: their defaults, the
// YAML file, OUTBOXD_* environment variables and command-line flags, merged
// with the precedence flag > environment > file > default, and validated
// with errors that name the setting. The delivery settings, endpoints and
// Kafka settings are checked by the validation of the packages they
// configure (outbox, httpsink, kafka), whose errors name Go fields; Explain
// translates those to these settings' names.
package config
