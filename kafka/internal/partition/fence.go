package partition

import (
	"fmt"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/kafka/internal/changelog"
	"github.com/outboxd/outbox/outbox"
)

// fencedEntry reads the changelog record m of partition p, given
// maxEpoch, the highest owner epoch seen before it. A record of a lower
// epoch was written by an owner that had lost the partition: it is fenced
// and skipped. A fence record carries no entry. fencedEntry returns the
// entry to apply (ok false when there is none), the highest epoch seen
// with m, whether m was fenced, and the Env's TopicError when m is damaged.
func (g *Env) fencedEntry(m *kafkago.Message, p int, maxEpoch int64) (en outbox.ChangelogEntry, ok bool, epoch int64, fenced bool, err error) {
	topic := g.Config.ChangelogTopic
	e, fence, err := changelog.RecordEpoch(m.Headers)
	if err != nil {
		return en, false, maxEpoch, false, g.TopicError(topic, p, fmt.Sprintf("record at offset %d: %v", m.Offset, err), err)
	}
	if e < maxEpoch {
		return en, false, maxEpoch, true, nil
	}
	if fence {
		return en, false, e, false, nil
	}
	en, err = changelog.DecodeRecord(m.Key, m.Value, m.Headers, m.Time)
	if err != nil {
		return en, false, e, false, g.TopicError(topic, p, fmt.Sprintf("record at offset %d: %v", m.Offset, err), err)
	}
	en.LSN = uint64(m.Offset) + 1
	return en, true, e, false, nil
}
