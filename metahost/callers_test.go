package metahost

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/metaplane"
	"github.com/iggy-shard/iggy-shard/wire"
)

// TestRegistrationRefusal: a caller session's refused Register answers as the
// reference's HTTP server does (core/server/src/http/session.rs in apache/iggy):
// 58 when provably not admitted, 101 when the minted client id is another
// user's, 9 when the outcome is unknown.
func TestRegistrationRefusal(t *testing.T) {
	for _, c := range []struct {
		answer metaplane.Answer
		want   wire.ErrorCode
	}{
		{metaplane.Answer{Status: wire.ErrTransientNotAccepted}, wire.ErrTransientNotAccepted},
		{metaplane.Answer{Rejection: wire.ErrTransientNotAccepted}, wire.ErrTransientNotAccepted}, // the pipeline full
		{metaplane.Answer{Evict: wire.EvictionSessionError}, wire.ErrInvalidClientId},
		{metaplane.Answer{Status: wire.ErrTransientNotCommitted}, wire.ErrCannotEstablishConnection},
		{metaplane.Answer{Rejection: wire.ErrTransientNotCommitted}, wire.ErrCannotEstablishConnection},
		{metaplane.Answer{Evict: wire.EvictionNoSession}, wire.ErrCannotEstablishConnection},
	} {
		if got := registrationRefusal(&c.answer); got != c.want {
			t.Errorf("%+v: %v, want %v", c.answer, got, c.want)
		}
	}
}
