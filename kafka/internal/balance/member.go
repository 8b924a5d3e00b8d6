package balance

import "encoding/json"

// Protocol is the assignor's protocol name; every member of a group must
// speak it.
const Protocol = "outbox-warm"

// Warm maps a partition to the changelog offset of its checkpoint.
type Warm map[int]int64

// MemberData is what a member tells the group when it joins (its
// UserData, as JSON): the partitions it holds warm, where its API is, and
// the hashes of its static endpoint definitions. Decoders accept the older
// forms, a bare Warm object and one without static hashes, and ignore
// fields they do not know, so members of different versions can share a
// group.
type MemberData struct {
	// Warm holds the partitions with a checkpointed store.
	Warm Warm `json:"warm"`
	// API is the base URL of the member's HTTP API, "" when it announces
	// none.
	API string `json:"api,omitempty"`
	// Static maps the name of each endpoint the member defines statically
	// to a hash of its definition. nil (absent or null) announces nothing:
	// an older member, or one that does not compare them; an empty map
	// announces that it defines none.
	Static map[string]string `json:"static"`
}

// DecodeMemberData decodes a member's UserData; anything unusable holds
// nothing warm, announces no API and no static hashes.
func DecodeMemberData(b []byte) MemberData {
	var m MemberData
	if json.Unmarshal(b, &m) == nil && (m.Warm != nil || m.API != "" || m.Static != nil) {
		return m
	}
	var w Warm
	if json.Unmarshal(b, &w) == nil {
		return MemberData{Warm: w}
	}
	return MemberData{}
}
