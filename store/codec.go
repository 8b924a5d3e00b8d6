package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"time"
	"unsafe"
)

// Every value the store writes is framed:
//
//	kind (1 byte) | codec version (1 byte) | body length (4 bytes, big-endian) | body | CRC32-C (4 bytes, big-endian)
//
// The CRC covers everything before it. A decoder checks the frame (length,
// CRC, kind) before it reads a field, so a torn or damaged value is reported
// as ErrCorrupt and never decoded into garbage. A newer codec version than
// this build knows is ErrSchemaTooNew. Bodies are read field by field in a
// fixed order; bytes after the last known field are ignored, so a later
// version of the same codec may append fields.
const (
	kindRecord   byte = 'R'
	kindEntry    byte = 'E'
	kindEndpoint byte = 'P'

	codecVersion byte = 1

	frameHeader  = 6
	frameTrailer = 4
	frameMin     = frameHeader + frameTrailer
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EncodeRecord returns the framed binary encoding of r (Headers sorted by
// name, times in UTC with nanosecond precision).
func EncodeRecord(r *Record) []byte {
	return appendRecord(make([]byte, 0, recordSizeHint(r)), r)
}

// appendRecord appends the frame of r to dst.
func appendRecord(dst []byte, r *Record) []byte {
	start := len(dst)
	e := &encoder{b: append(dst, kindRecord, codecVersion, 0, 0, 0, 0)}
	e.record(r)
	return e.finishAt(start)
}

// recordSizeHint is an upper bound of the size of r's frame.
func recordSizeHint(r *Record) int {
	n := frameMin + 16 + 14*binary.MaxVarintLen64 + 4*(1+2*binary.MaxVarintLen64) +
		len(r.ID) + len(r.Key) + len(r.Destination) + len(r.Endpoint) + len(r.Method) +
		len(r.Payload) + len(r.LastError) + len(r.DeadReason) + len(r.TraceParent) + len(r.TraceState) + len(r.Topic)
	for k, v := range r.Headers {
		n += 2*binary.MaxVarintLen64 + len(k) + len(v)
	}
	return n
}

// DecodeRecord decodes a value written by EncodeRecord. It returns an error
// matching ErrCorrupt for anything that is not an intact record frame, and
// ErrSchemaTooNew for a record written by a newer codec.
func DecodeRecord(b []byte) (*Record, error) {
	body, err := unframe(b, kindRecord)
	if err != nil {
		return nil, err
	}
	// One private copy of the body backs every string and the payload of
	// the record: one allocation instead of one per field. The copy is never
	// written to, so the strings made over it stay immutable.
	d := decoder{b: bytes.Clone(body), owned: true}
	r := d.record()
	if d.err != nil {
		return nil, d.err
	}
	return r, nil
}

// EncodeEntry returns the framed binary encoding of a changelog entry. The
// record, if any, is embedded as its EncodeRecord frame.
func EncodeEntry(en *Entry) []byte {
	var rec []byte
	if en.Record != nil {
		rec = EncodeRecord(en.Record)
	}
	return encodeEntryWith(en, rec)
}

// encodeEntryWith encodes en with an already encoded record frame (or nil).
func encodeEntryWith(en *Entry, rec []byte) []byte {
	return appendEntry(make([]byte, 0, frameMin+48+len(en.ID)+len(en.Reason)+len(rec)), en, rec)
}

// appendEntry appends the encoding of en (with the record frame rec, or nil)
// to dst.
func appendEntry(dst []byte, en *Entry, rec []byte) []byte {
	e := &encoder{b: append(dst, kindEntry, codecVersion, 0, 0, 0, 0)}
	start := len(dst)
	e.uvarint(en.LSN)
	e.byte(byte(en.Op))
	e.str(en.ID)
	e.uvarint(en.Version)
	e.time(en.Time)
	e.str(en.Reason)
	e.bytes(rec)
	return e.finishAt(start)
}

// entryHeadMax is an upper bound of the bytes a changelog entry for id with
// reason holds before its embedded record frame.
func entryHeadMax(id, reason string) int {
	return frameHeader + 4*binary.MaxVarintLen64 + 1 + len(id) + len(reason) + 1 + 2*binary.MaxVarintLen64 +
		binary.MaxVarintLen64
}

// entryAround completes in place the changelog entry en that embeds the record
// frame buf[off:off+n]: the entry's head goes into the headroom before off
// (at least entryHeadMax bytes) and its trailer into buf[off+n:off+n+4]. It
// returns the entry, byte for byte what appendEntry writes, so one copy of
// the record serves both the events bucket and the changelog. scratch is
// reused for the head and returned.
func entryAround(buf []byte, off, n int, en *Entry, scratch []byte) (entry, scr []byte) {
	e := encoder{b: append(scratch[:0], kindEntry, codecVersion, 0, 0, 0, 0)}
	e.uvarint(en.LSN)
	e.byte(byte(en.Op))
	e.str(en.ID)
	e.uvarint(en.Version)
	e.time(en.Time)
	e.str(en.Reason)
	e.uvarint(uint64(n))
	start := off - len(e.b)
	copy(buf[start:off], e.b)
	end := off + n
	binary.BigEndian.PutUint32(buf[start+2:start+6], uint32(end-start-frameHeader))
	binary.BigEndian.PutUint32(buf[end:end+frameTrailer], crc32.Checksum(buf[start:end], castagnoli))
	return buf[start : end+frameTrailer : end+frameTrailer], e.b
}

// DecodeEntry decodes a value written by EncodeEntry, with the same error
// contract as DecodeRecord.
func DecodeEntry(b []byte) (*Entry, error) {
	en, rec, err := decodeEntryHead(b)
	if err != nil {
		return nil, err
	}
	if len(rec) > 0 {
		if en.Record, err = DecodeRecord(rec); err != nil {
			return nil, fmt.Errorf("changelog entry %d: %w", en.LSN, err)
		}
		if en.Record.ID != en.ID {
			return nil, fmt.Errorf("%w: changelog entry %d for %q holds record %q", ErrCorrupt, en.LSN, en.ID, en.Record.ID)
		}
	}
	return en, nil
}

// decodeEntryHead checks the frame and decodes everything but the embedded
// record, whose frame it returns (nil when there is none).
func decodeEntryHead(b []byte) (*Entry, []byte, error) {
	body, err := unframe(b, kindEntry)
	if err != nil {
		return nil, nil, err
	}
	d := decoder{b: body}
	en := &Entry{}
	en.LSN = d.uvarint()
	en.Op = Op(d.byte())
	en.ID = d.str()
	en.Version = d.uvarint()
	en.Time = d.time()
	en.Reason = d.str()
	rec := d.bytesRef()
	if d.err != nil {
		return nil, nil, d.err
	}
	if en.Op == opInvalid || en.Op >= opLimit {
		return nil, nil, fmt.Errorf("%w: changelog entry %d has unknown op %d", ErrCorrupt, en.LSN, en.Op)
	}
	if en.Op.Deleting() != (len(rec) == 0) {
		return nil, nil, fmt.Errorf("%w: changelog entry %d (%v) record presence does not match its op", ErrCorrupt, en.LSN, en.Op)
	}
	return en, rec, nil
}

func encodeEndpoint(ep *EndpointState) []byte {
	e := newEncoder(kindEndpoint, 64+len(ep.Name)+len(ep.DisabledReason))
	e.str(ep.Name)
	var flags uint64
	if ep.Disabled {
		flags |= 1
	}
	e.uvarint(flags)
	e.str(ep.DisabledReason)
	e.time(ep.DisabledAt)
	e.time(ep.NotBefore)
	e.varint(int64(ep.FailureStreak))
	e.varint(int64(ep.LastStatus))
	e.time(ep.UpdatedAt)
	// Added after the first layout: decoders read them when present, and
	// older builds ignore the bytes past UpdatedAt.
	e.time(ep.ThrottledAt)
	e.varint(int64(ep.Throttles))
	e.time(ep.BreakerUntil)
	e.time(ep.BreakerOpenedAt)
	e.varint(int64(ep.BreakerOpens))
	return e.finish()
}

func decodeEndpoint(b []byte) (EndpointState, error) {
	body, err := unframe(b, kindEndpoint)
	if err != nil {
		return EndpointState{}, err
	}
	d := decoder{b: body}
	var ep EndpointState
	ep.Name = d.str()
	ep.Disabled = d.uvarint()&1 != 0
	ep.DisabledReason = d.str()
	ep.DisabledAt = d.time()
	ep.NotBefore = d.time()
	ep.FailureStreak = d.int()
	ep.LastStatus = d.int()
	ep.UpdatedAt = d.time()
	if d.err == nil && len(d.b) > 0 {
		ep.ThrottledAt = d.time()
		ep.Throttles = d.int()
	}
	if d.err == nil && len(d.b) > 0 {
		ep.BreakerUntil = d.time()
		ep.BreakerOpenedAt = d.time()
		ep.BreakerOpens = d.int()
	}
	return ep, d.err
}

type encoder struct{ b []byte }

// headers writes a header map: its size, then each name and value, names
// in order, so that equal maps encode alike.
func (e *encoder) headers(m map[string]string) {
	var small [8]string
	names := small[:0]
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	e.uvarint(uint64(len(names)))
	for _, k := range names {
		e.str(k)
		e.str(m[k])
	}
}

func newEncoder(kind byte, sizeHint int) *encoder {
	b := make([]byte, frameHeader, frameMin+sizeHint)
	b[0], b[1] = kind, codecVersion
	return &encoder{b: b}
}

func (e *encoder) finish() []byte { return e.finishAt(0) }

// finishAt completes the frame that starts at e.b[start:].
func (e *encoder) finishAt(start int) []byte {
	binary.BigEndian.PutUint32(e.b[start+2:start+6], uint32(len(e.b)-start-frameHeader))
	return binary.BigEndian.AppendUint32(e.b, crc32.Checksum(e.b[start:], castagnoli))
}

func (e *encoder) byte(v byte)      { e.b = append(e.b, v) }
func (e *encoder) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) str(s string)     { e.uvarint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *encoder) bytes(p []byte)   { e.uvarint(uint64(len(p))); e.b = append(e.b, p...) }
func (e *encoder) time(t time.Time) {
	if t.IsZero() {
		e.byte(0)
		return
	}
	e.byte(1)
	e.varint(t.Unix())
	e.uvarint(uint64(t.Nanosecond()))
}

// Record bodies start with Version and seq as fixed 8-byte fields, so that a
// record encoded before its commit can get its LSN patched in (patchRecord).
const (
	recVersionOff = frameHeader
	recSeqOff     = frameHeader + 8
)

func (e *encoder) record(r *Record) {
	e.b = binary.BigEndian.AppendUint64(e.b, r.Version)
	e.b = binary.BigEndian.AppendUint64(e.b, r.seq)
	e.str(r.ID)
	e.str(r.Key)
	e.str(r.Destination)
	e.str(r.Endpoint)
	e.str(r.Method)
	e.headers(r.Headers)
	e.bytes(r.Payload)
	e.time(r.CreatedAt)
	e.varint(int64(r.Attempts))
	e.varint(int64(r.Deliveries))
	e.time(r.NextAttemptAt)
	e.varint(int64(r.LastStatus))
	e.str(r.LastError)
	e.time(r.DeadAt)
	e.str(r.DeadReason)
	// Added after the first layout, and written only when set, so that a
	// record without it keeps its first-layout bytes. Older builds ignore
	// it; a field appended later must write it (flag 0 when zero) first.
	if !r.DeliverAt.IsZero() || r.TraceParent != "" || r.Topic != "" {
		e.time(r.DeliverAt)
	}
	// The trace context, added after DeliverAt, likewise: written only with
	// a TraceParent (a TraceState alone is not kept), so a record without
	// one keeps its bytes; a field appended after it writes it (two empty
	// strings) first.
	if r.TraceParent != "" || r.Topic != "" {
		e.str(r.TraceParent)
		e.str(r.TraceState)
	}
	// The topic of a fan-out delivery, added after the trace context,
	// likewise: written only when set.
	if r.Topic != "" {
		e.str(r.Topic)
	}
}

// patchRecord sets the Version and seq of an encoded record frame in place
// and recomputes its checksum.
func patchRecord(frame []byte, version, seq uint64) {
	binary.BigEndian.PutUint64(frame[recVersionOff:], version)
	binary.BigEndian.PutUint64(frame[recSeqOff:], seq)
	end := len(frame) - frameTrailer
	binary.BigEndian.PutUint32(frame[end:], crc32.Checksum(frame[:end], castagnoli))
}

// unframe checks a frame of the given kind and returns its body.
func unframe(b []byte, kind byte) ([]byte, error) {
	if len(b) < frameMin {
		return nil, fmt.Errorf("%w: %d bytes is shorter than a frame", ErrCorrupt, len(b))
	}
	n := binary.BigEndian.Uint32(b[2:6])
	if uint64(n) != uint64(len(b)-frameMin) {
		return nil, fmt.Errorf("%w: frame says %d body bytes, have %d", ErrCorrupt, n, len(b)-frameMin)
	}
	end := len(b) - frameTrailer
	if got, want := crc32.Checksum(b[:end], castagnoli), binary.BigEndian.Uint32(b[end:]); got != want {
		return nil, fmt.Errorf("%w: checksum mismatch (%08x != %08x)", ErrCorrupt, got, want)
	}
	if b[0] != kind {
		return nil, fmt.Errorf("%w: value of kind %q where %q was expected", ErrCorrupt, b[0], kind)
	}
	if b[1] == 0 {
		return nil, fmt.Errorf("%w: codec version 0", ErrCorrupt)
	}
	if b[1] > codecVersion {
		return nil, fmt.Errorf("%w: value written with codec version %d, this build knows %d", ErrSchemaTooNew, b[1], codecVersion)
	}
	return b[frameHeader:end], nil
}

// decoder reads fields from a checked body. The first error sticks; every
// read after it returns a zero value. All lengths are checked against the
// bytes left, so allocation is bounded by the input size.
type decoder struct {
	b   []byte
	err error
	// owned means b is a private copy that nothing writes to: strings and
	// byte slices may point into it instead of being copied.
	owned bool
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: bad %s", ErrCorrupt, what)
	}
}

// headers reads a header map as encoder.headers writes it: nil when empty;
// a count beyond what is left, or names out of order, fail d.
func (d *decoder) headers() map[string]string {
	n := d.uvarint()
	if n > uint64(len(d.b)/2) {
		d.fail("header count")
		return nil
	}
	if n == 0 {
		return nil
	}
	m := make(map[string]string, n)
	prev := ""
	for i := uint64(0); i < n && d.err == nil; i++ {
		k := d.str()
		if i > 0 && k <= prev {
			d.fail("header order")
		}
		prev = k
		m[k] = d.str()
	}
	return m
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 1 {
		d.fail("byte")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) fixed64() uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.fail("fixed64")
		return 0
	}
	v := binary.BigEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int() int {
	v := d.varint()
	if v > math.MaxInt32 || v < math.MinInt32 {
		d.fail("integer range")
		return 0
	}
	return int(v)
}

func (d *decoder) bytesRef() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("length")
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) str() string {
	v := d.bytesRef()
	if d.owned {
		return unsafe.String(unsafe.SliceData(v), len(v))
	}
	return string(v)
}

// bytes returns a field of bytes with its capacity cut to its length, so an
// append to it copies instead of writing over the next field.
func (d *decoder) bytes() []byte {
	v := d.bytesRef()
	if len(v) == 0 {
		return nil
	}
	if d.owned {
		return v
	}
	return append([]byte(nil), v...)
}

func (d *decoder) time() time.Time {
	switch d.byte() {
	case 0:
		return time.Time{}
	case 1:
		sec := d.varint()
		nsec := d.uvarint()
		if nsec >= 1e9 {
			d.fail("time")
			return time.Time{}
		}
		t := time.Unix(sec, int64(nsec)).UTC()
		if t.IsZero() {
			// The zero time is encoded as flag 0; a flag 1 value equal to it
			// was never written by this codec.
			d.fail("time")
		}
		return t
	}
	d.fail("time flag")
	return time.Time{}
}

func (d *decoder) record() *Record {
	r := &Record{}
	r.Version = d.fixed64()
	r.seq = d.fixed64()
	r.ID = d.str()
	r.Key = d.str()
	r.Destination = d.str()
	r.Endpoint = d.str()
	r.Method = d.str()
	r.Headers = d.headers()
	if d.err != nil {
		return nil
	}
	r.Payload = d.bytes()
	r.CreatedAt = d.time()
	r.Attempts = d.int()
	r.Deliveries = d.int()
	r.NextAttemptAt = d.time()
	r.LastStatus = d.int()
	r.LastError = d.str()
	r.DeadAt = d.time()
	r.DeadReason = d.str()
	if d.err == nil && len(d.b) > 0 {
		r.DeliverAt = d.time()
	}
	if d.err == nil && len(d.b) > 0 {
		r.TraceParent = d.str()
		r.TraceState = d.str()
		if r.TraceParent == "" {
			r.TraceState = "" // never written alone
		}
	}
	if d.err == nil && len(d.b) > 0 {
		r.Topic = d.str()
	}
	if d.err != nil {
		return nil
	}
	if r.ID == "" {
		d.fail("empty ID")
		return nil
	}
	return r
}
