package bench

import (
	"crypto/tls"
	"fmt"
	"strings"
	"time"
)

// Kind is a benchmark kind, as Apache Iggy's iggy-bench names them.
type Kind string

const (
	PinnedProducer                   Kind = "pinned-producer"
	PinnedConsumer                   Kind = "pinned-consumer"
	PinnedProducerAndConsumer        Kind = "pinned-producer-and-consumer"
	BalancedProducer                 Kind = "balanced-producer"
	BalancedConsumerGroup            Kind = "balanced-consumer-group"
	BalancedProducerAndConsumerGroup Kind = "balanced-producer-and-consumer-group"
	EndToEndProducingConsumer        Kind = "end-to-end-producing-consumer"
	EndToEndProducingConsumerGroup   Kind = "end-to-end-producing-consumer-group"
)

// Kinds lists every kind with its short alias, in the upstream order.
var Kinds = []struct {
	Kind  Kind
	Alias string
	About string
}{
	{PinnedProducer, "pp", "N producers, each sending to its own stream (one partition)"},
	{PinnedConsumer, "pc", "N consumers, each polling its own stream (one partition), seeded first"},
	{PinnedProducerAndConsumer, "ppc", "pinned producers and pinned consumers in parallel"},
	{BalancedProducer, "bp", "N producers sending balanced over the partitions of K streams"},
	{BalancedConsumerGroup, "bcg", "N consumers in G consumer groups (one per stream) polling M partitions, seeded first"},
	{BalancedProducerAndConsumerGroup, "bpcg", "balanced producers and consumer groups in parallel"},
	{EndToEndProducingConsumer, "e2e", "each actor sends a batch and polls it back before the next: round-trip latency"},
	{EndToEndProducingConsumerGroup, "e2ecg", "max(P, C) actors, each sending balanced and polling as a group member on one connection"},
}

// ParseKind accepts a kind's name or alias.
func ParseKind(s string) (Kind, error) {
	for _, k := range Kinds {
		if s == string(k.Kind) || s == k.Alias {
			return k.Kind, nil
		}
	}
	names := make([]string, 0, len(Kinds))
	for _, k := range Kinds {
		names = append(names, k.Alias)
	}
	return "", fmt.Errorf("unknown benchmark kind %q (one of %s, or their long names)", s, strings.Join(names, ", "))
}

func (k Kind) producers() bool {
	return k == PinnedProducer || k == PinnedProducerAndConsumer || k == BalancedProducer || k == BalancedProducerAndConsumerGroup ||
		k == EndToEndProducingConsumerGroup
}

func (k Kind) consumers() bool {
	return k == PinnedConsumer || k == PinnedProducerAndConsumer || k == BalancedConsumerGroup || k == BalancedProducerAndConsumerGroup ||
		k == EndToEndProducingConsumerGroup
}

func (k Kind) pinned() bool {
	return k == PinnedProducer || k == PinnedConsumer || k == PinnedProducerAndConsumer || k == EndToEndProducingConsumer
}

func (k Kind) groups() bool {
	return k == BalancedConsumerGroup || k == BalancedProducerAndConsumerGroup || k == EndToEndProducingConsumerGroup
}

// seeded kinds only consume: the run first fills their streams, unmeasured.
func (k Kind) seeded() bool { return k == PinnedConsumer || k == BalancedConsumerGroup }

// Config is one benchmark run. Zero counts take the kind's defaults (Defaults).
type Config struct {
	Kind Kind

	ServerAddress string
	Username      string
	Password      string
	// TLS, when set, is the client's TLS configuration (client.NewTLSConfig); nil
	// means plain TCP.
	TLS *tls.Config

	Producers      int // producers, or producing consumers for e2e
	Consumers      int
	Streams        int
	Partitions     int // per topic
	ConsumerGroups int // one per stream

	MessagesPerBatch int
	MessageSizeBytes int
	// Batches is each actor's measured batch count. With Duration set instead,
	// producers send until it has passed.
	Batches  int
	Duration time.Duration
	// Warmup runs every actor's loop unmeasured for this long first. Warm-up messages
	// are verified like the others but count in no figure. Producers send their
	// measured batches after it; the consumers of pc and bcg, which read a fixed
	// seed, spend part of it in the warm-up.
	Warmup time.Duration
	// RateLimitBytesPerSecond caps the payload rate of all actors together (0 = none);
	// each gets an equal share.
	RateLimitBytesPerSecond uint64

	// SkipMessageChecks turns off the per-message checks of polled messages (frame
	// checksums, ids, payload sizes, offset order within a poll); the counts and the
	// offsets per partition are checked always.
	SkipMessageChecks bool
	// KeepStreams leaves the bench streams on the server after the run.
	KeepStreams bool
	// StallTimeout fails a consumer that sees no new message for this long while
	// messages are still owed to it (a lost message would otherwise hang the run).
	StallTimeout time.Duration
	// RequestTimeout bounds each request; DialTimeout each connection and login.
	RequestTimeout time.Duration
	DialTimeout    time.Duration
}

// Default values, the upstream iggy-bench's.
const (
	DefaultServerAddress    = "127.0.0.1:8090"
	DefaultUsername         = "iggy"
	DefaultPassword         = "iggy"
	DefaultActors           = 8
	DefaultBalancedStreams  = 1
	DefaultPartitions       = 24 // balanced kinds; pinned kinds have one
	DefaultMessagesPerBatch = 1000
	DefaultMessageSizeBytes = 1000
	DefaultBatches          = 1000
	DefaultStallTimeout     = 10 * time.Second
	DefaultRequestTimeout   = 30 * time.Second
	DefaultDialTimeout      = 5 * time.Second

	// StreamNamePrefix names every stream the tool creates, so that it never touches
	// a user's: bench-stream-1, bench-stream-2, ...
	StreamNamePrefix = "bench-stream-"
	TopicName        = "bench-topic"
	GroupName        = "bench-group"

	// messageSizeMin leaves room for nothing but is the protocol's floor (an empty
	// payload is refused).
	messageSizeMin = 1
	// batchBytesMax keeps a batch inside the server's default 64 MiB frame.
	batchBytesMax = 60 << 20
)

// WithDefaults fills the zero fields of c with the defaults of its kind.
func (c Config) WithDefaults() Config {
	set := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	if c.ServerAddress == "" {
		c.ServerAddress = DefaultServerAddress
	}
	if c.Username == "" {
		c.Username = DefaultUsername
	}
	if c.Password == "" {
		c.Password = DefaultPassword
	}
	if c.Kind.producers() || c.Kind == EndToEndProducingConsumer {
		set(&c.Producers, DefaultActors)
	}
	if c.Kind.consumers() {
		set(&c.Consumers, DefaultActors)
	}
	switch {
	case c.Kind.groups():
		set(&c.ConsumerGroups, 1)
		set(&c.Streams, c.ConsumerGroups)
		set(&c.Partitions, DefaultPartitions)
	case c.Kind == BalancedProducer:
		set(&c.Streams, DefaultBalancedStreams)
		set(&c.Partitions, DefaultPartitions)
	case c.Kind == PinnedConsumer:
		set(&c.Streams, c.Consumers)
		set(&c.Partitions, 1)
	default: // pinned producers, e2e
		set(&c.Streams, c.Producers)
		set(&c.Partitions, 1)
	}
	set(&c.MessagesPerBatch, DefaultMessagesPerBatch)
	set(&c.MessageSizeBytes, DefaultMessageSizeBytes)
	if c.Duration == 0 {
		set(&c.Batches, DefaultBatches)
	}
	if c.StallTimeout == 0 {
		c.StallTimeout = DefaultStallTimeout
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	return c
}

// Validate names the first setting that does not fit the kind.
func (c *Config) Validate() error {
	if _, err := ParseKind(string(c.Kind)); err != nil {
		return err
	}
	positive := []struct {
		name string
		v    int
	}{{"messages-per-batch", c.MessagesPerBatch}, {"message-size", c.MessageSizeBytes}, {"streams", c.Streams}, {"partitions", c.Partitions}}
	for _, p := range positive {
		if p.v < 1 {
			return fmt.Errorf("--%s must be at least 1, got %d", p.name, p.v)
		}
	}
	if c.Kind.producers() || c.Kind == EndToEndProducingConsumer {
		if c.Producers < 1 {
			return fmt.Errorf("--producers must be at least 1 for %s, got %d", c.Kind, c.Producers)
		}
	} else if c.Producers != 0 {
		return fmt.Errorf("--producers does not apply to %s (it only consumes)", c.Kind)
	}
	if c.Kind.consumers() {
		if c.Consumers < 1 {
			return fmt.Errorf("--consumers must be at least 1 for %s, got %d", c.Kind, c.Consumers)
		}
	} else if c.Consumers != 0 {
		return fmt.Errorf("--consumers does not apply to %s", c.Kind)
	}
	if c.Kind.groups() {
		if c.ConsumerGroups < 1 {
			return fmt.Errorf("--consumer-groups must be at least 1, got %d", c.ConsumerGroups)
		}
		if c.Streams != c.ConsumerGroups {
			return fmt.Errorf("%s has one consumer group per stream: --streams %d must equal --consumer-groups %d", c.Kind, c.Streams, c.ConsumerGroups)
		}
		if c.Consumers < c.ConsumerGroups {
			return fmt.Errorf("--consumers %d leaves some of the %d consumer groups without a member", c.Consumers, c.ConsumerGroups)
		}
		if c.Kind.producers() && c.Producers < c.ConsumerGroups {
			return fmt.Errorf("--producers %d leaves some of the %d streams without a producer", c.Producers, c.ConsumerGroups)
		}
	} else if c.ConsumerGroups != 0 {
		return fmt.Errorf("--consumer-groups does not apply to %s", c.Kind)
	}
	if c.Kind == EndToEndProducingConsumer && c.Streams != c.Producers {
		return fmt.Errorf("%s gives each producing consumer its own stream: --streams %d must equal --producers %d", c.Kind, c.Streams, c.Producers)
	}
	if c.Kind.pinned() && c.Partitions != 1 {
		return fmt.Errorf("%s pins each actor to one partition: --partitions must be 1, got %d", c.Kind, c.Partitions)
	}
	if c.Partitions > 1000 {
		return fmt.Errorf("--partitions %d exceeds the protocol's 1000 per topic", c.Partitions)
	}
	if c.Kind.pinned() || c.Kind == BalancedProducer || c.Kind.groups() {
		actors := max(c.Producers, c.Consumers)
		if c.Streams > actors && !c.Kind.groups() {
			return fmt.Errorf("--streams %d is more than the %d actors that would use them", c.Streams, actors)
		}
	}
	if c.MessageSizeBytes < messageSizeMin {
		return fmt.Errorf("--message-size must be at least %d byte", messageSizeMin)
	}
	if batch := batchLength(c.MessagesPerBatch, c.MessageSizeBytes); batch > batchBytesMax {
		return fmt.Errorf("a batch of %d messages of %d bytes is %d bytes, more than the %d a request frame may carry", c.MessagesPerBatch, c.MessageSizeBytes, batch, batchBytesMax)
	}
	if c.Batches < 0 || c.Duration < 0 || c.Warmup < 0 {
		return fmt.Errorf("--batches, --duration and --warmup cannot be negative")
	}
	if (c.Batches == 0) == (c.Duration == 0) {
		return fmt.Errorf("give either --batches or --duration, not both (batches %d, duration %v)", c.Batches, c.Duration)
	}
	if c.Duration != 0 && c.Kind.seeded() {
		return fmt.Errorf("%s consumes what it seeded first: give --batches, not --duration", c.Kind)
	}
	if c.StallTimeout <= 0 || c.RequestTimeout <= 0 || c.DialTimeout <= 0 {
		return fmt.Errorf("timeouts must be positive")
	}
	if c.Username == "" {
		return fmt.Errorf("--username must not be empty")
	}
	return nil
}

// batchLength is the byte size of a batch of n messages of size bytes without user
// headers: the batch header and one frame header per message.
func batchLength(n, size int) int {
	return batchHeaderSizeBytes + n*(frameHeaderSizeBytes+size)
}
