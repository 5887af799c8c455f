module github.com/iggy-shard/iggy-shard

go 1.26.0

require (
	github.com/BurntSushi/toml v1.6.0 // indirect
	github.com/klauspost/cpuid/v2 v2.4.2 // indirect
	github.com/zeebo/xxh3 v1.1.0 // indirect
	golang.org/x/crypto v0.59.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	lukechampine.com/blake3 v1.4.1 // indirect
)
