package main

import (
	"context"
	"fmt"
	"io"
	"time"

	kafkago "github.com/segmentio/kafka-go"
)

// Record is one record of the topic, as --read prints it.
type Record struct {
	Partition int
	Offset    int64
	Key       string
	ID        string // the outbox-id header: the event's ID
	Value     string
}

// readTopic prints every record of the topic, partition by partition.
func readTopic(ctx context.Context, brokers []string, topic string, stdout io.Writer) error {
	recs, err := topicRecords(ctx, brokers, topic)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d records on topic %s:\n", len(recs), topic)
	for _, r := range recs {
		fmt.Fprintf(stdout, "  partition %d offset %d key %s outbox-id %s value %s\n", r.Partition, r.Offset, r.Key, r.ID, r.Value)
	}
	return nil
}

// topicRecords reads every record of the topic, partition by partition,
// each partition's in offset order.
func topicRecords(ctx context.Context, brokers []string, topic string) ([]Record, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tr := &kafkago.Transport{DialTimeout: 5 * time.Second}
	defer tr.CloseIdleConnections()
	cl := &kafkago.Client{Addr: kafkago.TCP(brokers...), Transport: tr}
	md, err := cl.Metadata(ctx, &kafkago.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, err
	}
	if len(md.Topics) != 1 || md.Topics[0].Error != nil {
		return nil, fmt.Errorf("topic %s: %v", topic, md.Topics)
	}
	var out []Record
	for p := range len(md.Topics[0].Partitions) {
		recs, err := partitionRecords(ctx, cl, topic, p)
		if err != nil {
			return nil, err
		}
		out = append(out, recs...)
	}
	return out, nil
}

func partitionRecords(ctx context.Context, cl *kafkago.Client, topic string, p int) ([]Record, error) {
	var out []Record
	for offset := int64(0); ; {
		res, err := cl.Fetch(ctx, &kafkago.FetchRequest{Topic: topic, Partition: p, Offset: offset, MaxBytes: 8 << 20})
		if err != nil {
			return nil, err
		}
		if res.Error != nil {
			return nil, res.Error
		}
		n := 0
		for {
			r, err := res.Records.ReadRecord()
			if err != nil {
				break
			}
			rec := Record{Partition: p, Offset: r.Offset}
			key, _ := kafkago.ReadAll(r.Key)
			value, _ := kafkago.ReadAll(r.Value)
			rec.Key, rec.Value = string(key), string(value)
			for _, h := range r.Headers {
				if h.Key == "outbox-id" {
					rec.ID = string(h.Value)
				}
			}
			out = append(out, rec)
			offset = r.Offset + 1
			n++
		}
		if n == 0 || offset >= res.HighWatermark {
			return out, nil
		}
	}
}
