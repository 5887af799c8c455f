package server

import (
	"github.com/iggy-shard/iggy-shard/request"
)

// The typed requests between shards are package request's; job is their name
// here, where most of the code handles them.
type job = request.Job

// outcomeOf classes a finished job's answer for the metrics: a committed
// rejection (a result section with an error code) counts as refused, as a status
// does.
func outcomeOf(j *job) outcome {
	switch evicted, refused := j.Refused(); {
	case evicted:
		return outcomeEvicted
	case refused:
		return outcomeRefused
	}
	return outcomeOK
}

// Recycle implements request.Home.
func (h *handler) Recycle(j *job) { h.recycle(j) }
