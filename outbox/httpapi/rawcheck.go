package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// rawChecker walks a JSON text that encoding/json has accepted and refuses
// what encoding/json lets through without a word:
//
//   - a key given twice in one object, where the last value would win
//     (keys are compared without regard to case, as encoding/json matches
//     struct fields and as HTTP matches header names);
//   - a string that is not valid UTF-8, or holds a \u escape of a lone
//     UTF-16 surrogate: encoding/json would replace it with U+FFFD, so that
//     IDs such as "k\xfe" and "k\xff" would become one.
//
// The value of the key verbatim (payload) in the objects at depth skipDepth
// is not checked: it is delivered as its bytes, nothing is rewritten.
type rawChecker struct {
	b         []byte
	i         int
	skipDepth int
	verbatim  string
	path      []pathSeg
}

// pathSeg is one step of the path to a value: an object key or an array
// index (the array named by name when it is the body).
type pathSeg struct {
	key   []byte
	index int
	name  string
}

// checkRaw checks b (a JSON text encoding/json accepted). The error is an
// *apiError naming the field, e.g. "events[1].id: is not valid UTF-8".
func checkRaw(b []byte, skipDepth int, verbatim, arrayName string) error {
	c := rawChecker{b: b, skipDepth: skipDepth, verbatim: verbatim, path: make([]pathSeg, 0, 8)}
	return c.value(0, arrayName)
}

func (c *rawChecker) ws() {
	for c.i < len(c.b) {
		switch c.b[c.i] {
		case ' ', '\t', '\r', '\n':
			c.i++
		default:
			return
		}
	}
}

// value checks the value at c.i; depth is the depth of its container.
func (c *rawChecker) value(depth int, arrayName string) error {
	c.ws()
	if c.i >= len(c.b) {
		return nil
	}
	switch c.b[c.i] {
	case '{':
		return c.object(depth + 1)
	case '[':
		c.i++
		for n := 0; ; n++ {
			c.ws()
			if c.i < len(c.b) && c.b[c.i] == ']' {
				c.i++
				return nil
			}
			c.path = append(c.path, pathSeg{index: n, name: arrayName})
			if err := c.value(depth+1, ""); err != nil {
				return err
			}
			c.path = c.path[:len(c.path)-1]
			c.ws()
			if c.i < len(c.b) && c.b[c.i] == ',' {
				c.i++
			}
		}
	case '"':
		_, err := c.str()
		if err != nil {
			return c.fail(err.Error())
		}
		return nil
	}
	c.skipLiteral()
	return nil
}

// object checks the object at c.i (at depth).
func (c *rawChecker) object(depth int) error {
	c.i++ // {
	var keys keySet
	for {
		c.ws()
		if c.i >= len(c.b) || c.b[c.i] == '}' {
			c.i++
			return nil
		}
		raw, err := c.str()
		if err != nil {
			return c.fail("a key " + err.Error() + ": " + strconv.Quote(string(raw)))
		}
		key := raw
		if bytes.IndexByte(raw, '\\') >= 0 {
			var s string
			_ = json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &s)
			key = []byte(s)
		}
		if k, dup := keys.add(key); dup {
			reason := "duplicate key " + strconv.Quote(string(key))
			if !bytes.Equal(k, key) {
				reason += " (the same as " + strconv.Quote(string(k)) + ": keys are matched without regard to case)"
			}
			return c.fail(reason)
		}
		c.ws()
		c.i++ // :
		if depth == c.skipDepth && bytes.EqualFold(key, []byte(c.verbatim)) {
			c.skip()
		} else {
			c.path = append(c.path, pathSeg{key: key})
			if err := c.value(depth, ""); err != nil {
				return err
			}
			c.path = c.path[:len(c.path)-1]
		}
		c.ws()
		if c.i < len(c.b) && c.b[c.i] == ',' {
			c.i++
		}
	}
}

// str reads the string at c.i and returns its raw content (between the
// quotes, escapes not decoded); err says what makes it not valid UTF-8.
func (c *rawChecker) str() (raw []byte, err error) {
	start := c.i + 1
	nonASCII := false
	var bad error
	for j := start; j < len(c.b); j++ {
		switch b := c.b[j]; {
		case b == '"':
			c.i = j + 1
			raw = c.b[start:j]
			if bad == nil && nonASCII && !utf8.Valid(raw) {
				bad = errNotUTF8
			}
			return raw, bad
		case b == '\\':
			if j+1 < len(c.b) && c.b[j+1] == 'u' && bad == nil {
				if r, ok := hex4(c.b[j+2:]); ok && utf16IsSurrogate(r) {
					next, okNext := rune(0), false
					if r < 0xdc00 && j+7 < len(c.b) && c.b[j+6] == '\\' && c.b[j+7] == 'u' {
						next, okNext = hex4(c.b[j+8:])
					}
					if !okNext || next < 0xdc00 || next > 0xdfff {
						bad = fmt.Errorf("%w (the escape \\u%04x is half of a UTF-16 pair)", errNotUTF8, r)
					} else {
						j += 6 // the low half, checked
					}
				}
			}
			j++
		case b >= 0x80:
			nonASCII = true
		}
	}
	c.i = len(c.b)
	return c.b[start:], bad
}

var errNotUTF8 = errorString("is not valid UTF-8")

type errorString string

func (e errorString) Error() string { return string(e) }

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[:4]), 16, 32)
	return rune(n), err == nil
}

func utf16IsSurrogate(r rune) bool { return 0xd800 <= r && r <= 0xdfff }

// skip passes over the value at c.i unchecked.
func (c *rawChecker) skip() {
	c.ws()
	if c.i >= len(c.b) {
		return
	}
	switch c.b[c.i] {
	case '"':
		c.skipString()
	case '{', '[':
		depth := 0
		for c.i < len(c.b) {
			switch c.b[c.i] {
			case '"':
				c.skipString()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					c.i++
					return
				}
			}
			c.i++
		}
	default:
		c.skipLiteral()
	}
}

// skipString passes over the string at c.i.
func (c *rawChecker) skipString() {
	c.i++
	for c.i < len(c.b) {
		j := bytes.IndexAny(c.b[c.i:], `"\`)
		if j < 0 {
			c.i = len(c.b)
			return
		}
		c.i += j
		if c.b[c.i] == '"' {
			c.i++
			return
		}
		c.i += 2 // an escape
	}
}

// skipLiteral passes over a number, true, false or null.
func (c *rawChecker) skipLiteral() {
	for c.i < len(c.b) {
		switch c.b[c.i] {
		case ',', ']', '}', ' ', '\t', '\r', '\n':
			return
		}
		c.i++
	}
}

// fail returns a 400 naming the current path.
func (c *rawChecker) fail(reason string) error {
	var sb strings.Builder
	for _, s := range c.path {
		switch {
		case s.key != nil:
			if sb.Len() > 0 {
				sb.WriteByte('.')
			}
			sb.Write(s.key)
		default:
			sb.WriteString(s.name)
			sb.WriteString("[" + strconv.Itoa(s.index) + "]")
		}
	}
	if sb.Len() == 0 {
		return errorf(http.StatusBadRequest, reason)
	}
	return errorf(http.StatusBadRequest, sb.String()+": "+reason)
}

// keySet holds the keys of one object, matched as bytes.EqualFold matches
// them, in time linear in their number: the first few are compared one
// by one (most objects have a handful of keys, and then no map is
// allocated), the rest are looked up by their case-folded form.
type keySet struct {
	few    [][]byte
	folded map[string][]byte
}

// fewKeys is how many keys a keySet compares one by one.
const fewKeys = 16

// add adds key; when a key equal to it without regard to case is in the
// set already, it returns that one and true instead.
func (s *keySet) add(key []byte) (prev []byte, dup bool) {
	for _, k := range s.few {
		if bytes.EqualFold(k, key) {
			return k, true
		}
	}
	if len(s.few) < fewKeys {
		s.few = append(s.few, key)
		return nil, false
	}
	if s.folded == nil {
		s.folded = make(map[string][]byte, fewKeys)
	}
	f := foldKey(key)
	if k, ok := s.folded[f]; ok {
		return k, true
	}
	s.folded[f] = key
	return nil, false
}

// foldKey returns key with every rune replaced by the least rune of its
// case-folding orbit (unicode.SimpleFold): two keys are equal under
// bytes.EqualFold exactly when their folded forms are equal.
func foldKey(key []byte) string {
	var b strings.Builder
	b.Grow(len(key))
	for _, r := range string(key) {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}
