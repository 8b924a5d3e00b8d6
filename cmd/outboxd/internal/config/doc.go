// Package config holds the settings of outboxd serve: their defaults, the
// YAML file, OUTBOXD_* environment variables and command-line flags, merged
// with the precedence flag > environment > file > default, and validated
// with errors that name the setting. The errors of the packages it
// configures name their Go fields; KafkaSettingError translates package
// kafka's to these settings' names.
package config
