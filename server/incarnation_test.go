package server

import "testing"

// cluster.partition_incarnation_tags reaches every shard's partition store: on, its
// groups send tagged ids; off (the first roll of an upgrade from a binary before
// the tag), untagged ones.
func TestClusterPartitionIncarnationTagsReachTheStores(t *testing.T) {
	cfg := defaultSetup()
	cfg.Cluster = threeNodeCluster()
	if !cfg.Cluster.PartitionIncarnationTags {
		t.Fatal("a cluster sends untagged ids by default")
	}
	for _, tags := range []bool{true, false} {
		cfg.Cluster.PartitionIncarnationTags = tags
		s := &Server{cfg: cfg, shardCount: 2}
		if untagged := s.partitionReplication(nil).UntaggedGroups; untagged == tags {
			t.Errorf("partition_incarnation_tags = %v: the stores' UntaggedGroups is %v", tags, untagged)
		}
	}
}
