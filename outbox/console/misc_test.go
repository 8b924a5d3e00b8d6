package console_test

import "time"

// farAhead is a delivery time no test reaches: the event stays pending.
func farAhead() time.Time { return time.Now().Add(time.Hour) }
