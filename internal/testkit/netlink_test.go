package testkit

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// echo serves a loopback echo server until the test ends.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String()
}

// roundTrip writes a line and reads it back, giving up after wait.
func roundTrip(c net.Conn, r *bufio.Reader, wait time.Duration) error {
	_ = c.SetDeadline(time.Now().Add(wait))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	line, err := r.ReadString('\n')
	if err == nil && line != "ping\n" {
		return errors.New("echoed " + line)
	}
	return err
}

// A Link forwards bytes both ways; a black hole holds them until it is
// healed, and then they arrive; a reset ends the open connection with an
// RST, and a new connection works.
func TestLinkBlackHoleAndReset(t *testing.T) {
	l := NewLink(t, echo(t))
	c, err := net.Dial("tcp", l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if err := roundTrip(c, r, 5*time.Second); err != nil {
		t.Fatalf("through a healthy link: %v", err)
	}

	l.Set(Faults{BlackHole: true})
	if err := roundTrip(c, r, 100*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("through a black hole: %v, want no answer", err)
	}
	l.Heal()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if line, err := r.ReadString('\n'); err != nil || line != "ping\n" {
		t.Fatalf("after healing, the held bytes: %q, %v", line, err)
	}

	if n := l.Reset(); n != 1 {
		t.Fatalf("reset %d connections, want 1", n)
	}
	if err := roundTrip(c, r, 5*time.Second); !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) {
		t.Fatalf("after a reset: %v, want a reset connection", err)
	}
	c2, err := net.Dial("tcp", l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	l.Set(Faults{Latency: time.Millisecond, Bandwidth: 1 << 20})
	if err := roundTrip(c2, bufio.NewReader(c2), 5*time.Second); err != nil {
		t.Fatalf("a new connection with latency and a bandwidth cap: %v", err)
	}
}

// A broker behind a KafkaFront advertises the front, so that a client's
// every connection comes through it, and a black hole on one client ID's
// Link stalls that client only.
func TestKafkaFrontRoutesByClientID(t *testing.T) {
	front := NewKafkaFront(t)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ListenFn(front.Listen), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	if got := cluster.ListenAddrs()[0]; got != front.Addr() {
		t.Fatalf("the broker advertises %s, want the front %s", got, front.Addr())
	}
	metadata := func(id string, wait time.Duration) error {
		tr := &kafkago.Transport{ClientID: id}
		defer tr.CloseIdleConnections()
		cl := &kafkago.Client{Addr: kafkago.TCP(front.Addr()), Transport: tr, Timeout: wait}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		resp, err := cl.Metadata(ctx, &kafkago.MetadataRequest{Topics: []string{"t"}})
		if err != nil {
			return err
		}
		if b := resp.Brokers[0]; net.JoinHostPort(b.Host, strconv.Itoa(b.Port)) != front.Addr() {
			return errors.New("metadata names " + b.Host)
		}
		return nil
	}
	front.Link("cut").Set(Faults{BlackHole: true})
	if err := metadata("fine", 10*time.Second); err != nil {
		t.Fatalf("a client without faults: %v", err)
	}
	if err := metadata("cut", 200*time.Millisecond); err == nil {
		t.Fatal("a black-holed client got metadata")
	}
	front.Link("cut").Heal()
	if err := metadata("cut", 10*time.Second); err != nil {
		t.Fatalf("the healed client: %v", err)
	}
}

// readClientID reads a Kafka request header from the network: any bytes
// give a client ID and the bytes read, or an error, never a panic, and
// what it read is the front of what was sent.
func FuzzReadClientID(f *testing.F) {
	f.Add([]byte("\x00\x00\x00\x20\x00\x12\x00\x03\x00\x00\x00\x01\x00\x09outboxd-0rest"))
	f.Add([]byte("\x00\x00\x00\x20\x00\x12\x00\x03\x00\x00\x00\x01\xff\xff"))
	f.Add([]byte("\x00\x00\x00\x20\x00\x12\x00\x03\x00\x00\x00\x01\x7f\xff"))
	f.Add([]byte("\x00\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		client, server := net.Pipe()
		go func() {
			client.Write(data)
			client.Close()
		}()
		defer server.Close()
		id, read, err := readClientID(server)
		if err != nil {
			return
		}
		if !bytes.HasPrefix(data, read) || len(read) < 14 || string(read[14:]) != id {
			t.Fatalf("read %q with ID %q from %q", read, id, data)
		}
	})
}
