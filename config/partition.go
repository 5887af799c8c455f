package config

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/iggy-shard/iggy-shard/shard"
)

// Partition is our keys of [system.partition], the section where Apache Iggy
// keeps its partition settings (iggy.apache.org/docs/server/configuration):
// how polls are answered without a copy (server/pollsplice.go) and how fast
// the scrubber re-verifies what they serve. Iggy has none of these settings;
// each is also an IGGY_SYSTEM_PARTITION_* variable (envName):
//
//	[system.partition]
//	splice_reply_min = "256 KiB"        # a poll reply shorter is copied; "off": every reply is
//	splice_trust_writes = false         # splice a batch's first read too (see SpliceTrustWrites)
//	splice_pin_max = "30 s"             # how long a spliced reply may hold its segment files
//	splice_plans_max = 64               # spliced replies a shard's partitions hold at once
//	splice_pipes_per_shard = 32         # pipes a shard splices replies through
//	splice_pipe_size = "1 MiB"          # each pipe's capacity (the kernel may grant less)
//	splice_ring = true                  # splice on a ring of each shard's own (see SpliceRing)
//	scrub_bytes_per_second = "8 MiB"    # the scrubber's rate per shard; 0 = off
//
// The defaults are the packages' own (partition.PlanConfig, shard.Config,
// partition.Replication), which say how they were chosen.
type Partition struct {
	// SpliceReplyBytesMin is partition.PlanConfig.ReplyBytesMin: a poll reply
	// shorter than this is copied, cheaper than a splice below it; negative
	// ("off"): every reply is copied.
	SpliceReplyBytesMin int64
	// SpliceTrustWrites is partition.PlanConfig.TrustWrites: a batch counts as
	// verified once its write completed, so its first poll is spliced too
	// instead of read, verified and copied. The risk: the scrubber re-reads
	// only sealed segments, so a batch corrupted on disk in a partition's
	// active segment reaches consumers unverified, and the official SDKs do
	// not verify on poll. Off by default.
	SpliceTrustWrites bool
	// SplicePinMax is partition.PlanConfig.PinMax: a spliced reply still
	// sending after this is cut short (its connection closed), so that a slow
	// consumer delays the disk space of a deleted segment by at most this.
	SplicePinMax time.Duration
	// SplicePlansMax is partition.PlanConfig.PlansMax: the spliced replies a
	// shard's partitions hold at once (each holds a descriptor per file run);
	// past it polls are copied.
	SplicePlansMax int
	// SplicePipesPerShard and SplicePipeSizeBytes are shard.Config's
	// PipesPerShardMax and PipeSizeBytes: the pool of pipes a shard splices
	// through (each pipe costs two open files).
	SplicePipesPerShard int
	SplicePipeSizeBytes int
	// SpliceRing is shard.Config.SpliceRing: spliced replies run on a ring of
	// each shard's own, without the connection ring's deferred task work: about
	// half the context switches per MB polled. On by default since its
	// completions wake the shard only when something waits on them: on a quiet
	// machine (6 interleaved runs of server's BenchmarkConsumerSpliceRing) a lone
	// consumer polled 3,552-4,620 MB/s with it against 2,652-3,972 without, four
	// consumers 4,100-4,796 against 3,866-5,023.
	SpliceRing bool
	// ScrubBytesPerSecond is partition.Replication.ScrubBytesPerSecond, the
	// rate at which a shard re-verifies its sealed segments to find bit rot
	// under ranges a poll verified once; 0 turns the scrubber off, and then
	// rot under a verified range is served until the segment is read cold.
	ScrubBytesPerSecond int64
}

// DefaultPartition is [system.partition]'s defaults; those the partition
// package owns are repeated here (config does not import it), and a server
// test keeps them equal (TestPartitionSettingsDefaultsAreThePackages).
func DefaultPartition() Partition {
	return Partition{
		SpliceReplyBytesMin: 256 << 10,
		SplicePinMax:        30 * time.Second,
		SplicePlansMax:      64,
		SplicePipesPerShard: shard.PipesPerShardMaxDefault,
		SplicePipeSizeBytes: shard.PipeSizeBytesDefault,
		SpliceRing:          true,
		ScrubBytesPerSecond: 8 << 20,
	}
}

// Bounds of [system.partition]'s settings: past them a setting is a mistake
// (a pipe smaller than a page, more pipes than the open-file limit allows).
const (
	splicePipesPerShardMax = 1024
	splicePipeSizeBytesMin = 4 << 10
	splicePipeSizeBytesMax = 256 << 20
	splicePlansMaxMax      = 1 << 16
	scrubBytesPerSecondMax = 1 << 40
)

type partitionSetting struct {
	key string // under system.partition
	set func(p *Partition, v string) error
}

var partitionSettings = []partitionSetting{
	{"splice_reply_min", func(p *Partition, v string) error {
		if strings.TrimSpace(v) == "off" {
			p.SpliceReplyBytesMin = -1
			return nil
		}
		n, err := ParseSizeBytes(v)
		if err != nil || n > 1<<40 {
			return fmt.Errorf("not a size (e.g. \"256 KiB\") or \"off\"")
		}
		p.SpliceReplyBytesMin = int64(n)
		return nil
	}},
	{"splice_trust_writes", func(p *Partition, v string) error {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("not true or false")
		}
		p.SpliceTrustWrites = on
		return nil
	}},
	{"splice_pin_max", func(p *Partition, v string) error {
		d, err := ParseDuration(v)
		if err != nil {
			return err
		}
		p.SplicePinMax = d
		return nil
	}},
	{"splice_plans_max", func(p *Partition, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("not a whole number")
		}
		p.SplicePlansMax = n
		return nil
	}},
	{"splice_pipes_per_shard", func(p *Partition, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("not a whole number")
		}
		p.SplicePipesPerShard = n
		return nil
	}},
	{"splice_pipe_size", func(p *Partition, v string) error {
		n, err := ParseSizeBytes(v)
		if err != nil || n > 1<<40 {
			return fmt.Errorf("not a size (e.g. \"1 MiB\")")
		}
		p.SplicePipeSizeBytes = int(n)
		return nil
	}},
	{"splice_ring", func(p *Partition, v string) error {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("not true or false")
		}
		p.SpliceRing = on
		return nil
	}},
	{"scrub_bytes_per_second", func(p *Partition, v string) error {
		n, err := ParseSizeBytes(v)
		if err != nil || n > 1<<62 {
			return fmt.Errorf("not a size (e.g. \"8 MiB\"; 0 = off)")
		}
		p.ScrubBytesPerSecond = int64(n)
		return nil
	}},
}

// applyFile applies the [system.partition] table of the TOML file.
func (p *Partition) applyFile(table map[string]any) error {
	flat := map[string]string{}
	if err := flattenTOML("system.partition", table, flat); err != nil {
		return err
	}
	keys := make([]string, 0, len(flat))
	for k := range flat {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	byKey := map[string]partitionSetting{}
	for _, s := range partitionSettings {
		byKey["system.partition."+s.key] = s
	}
	for _, k := range keys {
		s, ok := byKey[k]
		if !ok {
			return &SettingError{Setting: k, Value: flat[k], Reason: "unknown key"}
		}
		if err := s.set(p, flat[k]); err != nil {
			return &SettingError{Setting: k, Value: flat[k], Reason: err.Error()}
		}
	}
	return nil
}

// applyEnv applies the IGGY_SYSTEM_PARTITION_* variables; an empty value is
// ignored, as the reference does.
func (p *Partition) applyEnv(getenv func(string) string) error {
	for _, s := range partitionSettings {
		name := envName("system.partition." + s.key)
		if v := getenv(name); v != "" {
			if err := s.set(p, v); err != nil {
				return &SettingError{Setting: name, Value: v, Reason: err.Error()}
			}
		}
	}
	return nil
}

// validate checks the bounds, naming the TOML key.
func (p *Partition) validate() error {
	bad := func(key, value, reason string) error {
		return &SettingError{Setting: "system.partition." + key, Value: value, Reason: reason}
	}
	switch {
	case p.SpliceReplyBytesMin == 0:
		return bad("splice_reply_min", "0", "must be at least 1 byte, or \"off\"")
	case p.SplicePinMax <= 0:
		return bad("splice_pin_max", p.SplicePinMax.String(), "must be a positive duration (e.g. \"30 s\")")
	case p.SplicePlansMax < 1 || p.SplicePlansMax > splicePlansMaxMax:
		return bad("splice_plans_max", strconv.Itoa(p.SplicePlansMax), fmt.Sprintf("must be 1 to %d", splicePlansMaxMax))
	case p.SplicePipesPerShard < 1 || p.SplicePipesPerShard > splicePipesPerShardMax:
		return bad("splice_pipes_per_shard", strconv.Itoa(p.SplicePipesPerShard),
			fmt.Sprintf("must be 1 to %d (each pipe is two open files)", splicePipesPerShardMax))
	case p.SplicePipeSizeBytes < splicePipeSizeBytesMin || p.SplicePipeSizeBytes > splicePipeSizeBytesMax:
		return bad("splice_pipe_size", strconv.Itoa(p.SplicePipeSizeBytes), "must be 4 KiB to 256 MiB")
	case p.ScrubBytesPerSecond < 0 || p.ScrubBytesPerSecond > scrubBytesPerSecondMax:
		return bad("scrub_bytes_per_second", strconv.FormatInt(p.ScrubBytesPerSecond, 10), "must be 0 (off) to 1 TiB")
	}
	return nil
}
