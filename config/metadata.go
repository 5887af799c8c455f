package config

import (
	"fmt"
	"strconv"
)

// Metadata is Apache Iggy's [metadata] (upstream server-configuration,
// core/configs/src/server_config/metadata.rs in apache/iggy): the sizes of the
// metadata consensus plane, each also an IGGY_METADATA_* variable:
//
//	[metadata]
//	prepare_queue_depth = 32    # metadata ops in flight at once (1..127)
//	journal_slots = 1024        # the journal's header window (>= 4 x max(64, depth))
//	clients_table_max = 8192    # client table entries (2..65536); HTTP sessions get half
//
// They size the plane as the reference's do (server/metahost.go): the pipeline
// (vsr.CoreConfig.PipelineDepth), the header window (metaplane.Config.JournalSlots)
// and the client table (metaplane.Config.ClientsTableMax, and the snapshot's table
// as it loads). The client table decides evictions, the window and the pipeline
// what a primary may propose, so every replica of a cluster must hold the same
// values: the reference does not check that (each replica sizes its own), and
// iggy-shard's replicas compare none of them, so a cluster refuses any but the
// defaults (validate) rather than let one node's choices part from the others'.
type Metadata struct {
	PrepareQueueDepth int
	JournalSlots      int
	ClientsTableMax   int
}

// The defaults and bounds of [metadata], the reference's (metadata.rs); they are
// vsr's and metaplane's own too (config does not import vsr), and a server test
// keeps them equal (TestMetadataDefaultsAreThePlanes).
const (
	MetadataPrepareQueueDepthDefault = 32
	MetadataPrepareQueueDepthMax     = 127
	MetadataJournalSlotsDefault      = 1024
	MetadataJournalSlotsMax          = 1 << 20
	// metadataCheckpointMarginFloor: journal_slots is at least 4 x max(this,
	// prepare_queue_depth).
	metadataCheckpointMarginFloor  = 64
	MetadataClientsTableMaxDefault = 8192
	MetadataClientsTableMaxMin     = 2
	MetadataClientsTableMaxMax     = 1 << 16
)

// DefaultMetadata is [metadata]'s defaults.
func DefaultMetadata() Metadata {
	return Metadata{
		PrepareQueueDepth: MetadataPrepareQueueDepthDefault,
		JournalSlots:      MetadataJournalSlotsDefault,
		ClientsTableMax:   MetadataClientsTableMaxDefault,
	}
}

// CallerSessionsMax is the cap on the sessions of HTTP credentials: half the
// client table, as the reference's (core/server/src/http/session.rs).
func (m *Metadata) CallerSessionsMax() int { return m.ClientsTableMax / 2 }

type fileMetadata struct {
	PrepareQueueDepth *int64 `toml:"prepare_queue_depth"`
	JournalSlots      *int64 `toml:"journal_slots"`
	ClientsTableMax   *int64 `toml:"clients_table_max"`
}

// metadataSetting is one key of [metadata]: its TOML key, its variable and its
// field.
type metadataSetting struct {
	key, env string
	field    func(m *Metadata) *int
	file     func(f *fileMetadata) *int64
}

var metadataSettings = []metadataSetting{
	{"metadata.prepare_queue_depth", "IGGY_METADATA_PREPARE_QUEUE_DEPTH",
		func(m *Metadata) *int { return &m.PrepareQueueDepth }, func(f *fileMetadata) *int64 { return f.PrepareQueueDepth }},
	{"metadata.journal_slots", "IGGY_METADATA_JOURNAL_SLOTS",
		func(m *Metadata) *int { return &m.JournalSlots }, func(f *fileMetadata) *int64 { return f.JournalSlots }},
	{"metadata.clients_table_max", "IGGY_METADATA_CLIENTS_TABLE_MAX",
		func(m *Metadata) *int { return &m.ClientsTableMax }, func(f *fileMetadata) *int64 { return f.ClientsTableMax }},
}

func (m *Metadata) applyFile(f *fileMetadata) error {
	for _, s := range metadataSettings {
		if v := s.file(f); v != nil {
			if *v < 0 || *v > 1<<31-1 {
				return &SettingError{Setting: s.key, Value: strconv.FormatInt(*v, 10), Reason: "not a count"}
			}
			*s.field(m) = int(*v)
		}
	}
	return nil
}

func (m *Metadata) applyEnv(getenv func(string) string) error {
	for _, s := range metadataSettings {
		if v := getenv(s.env); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return &SettingError{Setting: s.env, Value: v, Reason: "not a count"}
			}
			*s.field(m) = n
		}
	}
	return nil
}

// validate checks the reference's ranges, and in a cluster that each is the
// default (see Metadata).
func (m *Metadata) validate(clustered bool) error {
	depth := m.PrepareQueueDepth
	if depth < 1 || depth > MetadataPrepareQueueDepthMax {
		return &SettingError{Setting: "metadata.prepare_queue_depth", Value: strconv.Itoa(depth),
			Reason: fmt.Sprintf("must be 1 to %d (the view change carries at most that many uncommitted ops)", MetadataPrepareQueueDepthMax)}
	}
	slotsMin := 4 * max(metadataCheckpointMarginFloor, depth)
	if m.JournalSlots < slotsMin || m.JournalSlots > MetadataJournalSlotsMax {
		return &SettingError{Setting: "metadata.journal_slots", Value: strconv.Itoa(m.JournalSlots),
			Reason: fmt.Sprintf("must be 4 x max(%d, prepare_queue_depth) = %d to %d", metadataCheckpointMarginFloor, slotsMin, MetadataJournalSlotsMax)}
	}
	if m.ClientsTableMax < MetadataClientsTableMaxMin || m.ClientsTableMax > MetadataClientsTableMaxMax {
		return &SettingError{Setting: "metadata.clients_table_max", Value: strconv.Itoa(m.ClientsTableMax),
			Reason: fmt.Sprintf("must be %d to %d", MetadataClientsTableMaxMin, MetadataClientsTableMaxMax)}
	}
	if !clustered {
		return nil
	}
	d := DefaultMetadata()
	for _, s := range metadataSettings {
		if v, def := *s.field(m), *s.field(&d); v != def {
			return &SettingError{Setting: s.key, Value: strconv.Itoa(v),
				Reason: fmt.Sprintf("must be the default (%d) in a cluster: every replica must size its metadata plane alike, and replicas do not compare it", def)}
		}
	}
	return nil
}
