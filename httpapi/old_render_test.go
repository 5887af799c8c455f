package httpapi

import (
	"encoding/base64"

	"github.com/iggy-shard/iggy-shard/jsonview"
	"github.com/iggy-shard/iggy-shard/wire"
)

// The poll answer as encoding/json writes jsonview's objects, the one rendering of
// a poll the HTTP API and the CLI share: the reference writePolled and
// appendUserHeaders must match byte for byte (TestPolledReplyMatchesEncodingJSON,
// TestPolledHeadersMatchEncodingJSON and their fuzz tests).

// renderPolled renders a poll reply. budgetBytes (0 = none) bounds the answer
// counted after base64; truncate allows dropping the messages past it (a poll
// without auto-commit: the client polls them next).
func renderPolled(p *wire.PolledMessages, budgetBytes int, truncate bool) jsonview.Polled {
	out := jsonview.Polled{PartitionID: p.PartitionID, CurrentOffset: p.CurrentOffset, Messages: []jsonview.PolledMessage{}}
	used := 0
	for it := p.Messages(); it.Next(); {
		m := it.Message()
		payload, headers := m.Payload(), m.UserHeaders()
		cost := messageJSONOverheadBytes + base64.StdEncoding.EncodedLen(len(payload)) + 2*base64.StdEncoding.EncodedLen(len(headers))
		if budgetBytes > 0 && truncate && len(out.Messages) > 0 && used+cost > budgetBytes {
			break
		}
		used += cost
		out.Messages = append(out.Messages, jsonview.PolledMessageOf(&m, payload))
	}
	out.Count = len(out.Messages)
	return out
}
