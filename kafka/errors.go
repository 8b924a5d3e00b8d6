package kafka

import "errors"

// Sentinel errors of the package. Test for them with errors.Is; returned
// errors wrap them with the details.
var (
	// ErrInvalidConfig is matched by every *ConfigError.
	ErrInvalidConfig = errors.New("kafka: invalid configuration")
	// ErrNotEmpty is returned by Restore when the target database already
	// holds data: a restore only ever builds a new database.
	ErrNotEmpty = errors.New("kafka: restore target is not a new database")
	// ErrBadChangelogRecord is wrapped by the error for a changelog topic
	// record that cannot be decoded (corrupt value, missing key, unknown
	// operation header).
	ErrBadChangelogRecord = errors.New("kafka: bad changelog record")
)

// ConfigError reports a bad setting. Setting is the dotted YAML name, such as
// "kafka.brokers" or "kafka.sasl.mechanism".
type ConfigError struct {
	// Setting names the setting, e.g. "kafka.tls.ca_file".
	Setting string
	// Reason says what is wrong with it.
	Reason string
}

// Error implements error.
func (e *ConfigError) Error() string { return e.Setting + ": " + e.Reason }

// Unwrap returns ErrInvalidConfig.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }
