package httpapi

import (
	"net/http"
	"sort"

	"github.com/iggy-shard/iggy-shard/jsonview"
	"github.com/iggy-shard/iggy-shard/wire"
)

// The system routes (apache/iggy core/server/src/http/system.rs).

func getStats(rc *reqCtx) error {
	reply, err := rc.doEmpty(wire.CodeGetStats)
	if err != nil {
		return err
	}
	var s wire.Stats
	if err := s.Decode(reply); err != nil {
		return err
	}
	return rc.json(jsonview.StatsOf(&s))
}

var optionScopes = map[string]wire.OptionsScope{
	"topic": wire.OptionsScopeTopic, "stream": wire.OptionsScopeStream, "user": wire.OptionsScopeUser,
}

func describeOptions(rc *reqCtx) error {
	scope, ok := optionScopes[rc.path("scope")]
	if !ok {
		return wire.ErrInvalidCommand
	}
	reply, err := rc.do(wire.CodeDescribeOptions, &wire.DescribeOptions{Scope: scope})
	if err != nil {
		return err
	}
	out := []jsonview.OptionSpec{}
	it := wire.IterOptionDescriptors(reply)
	for it.Next() {
		out = append(out, jsonview.OptionSpecOf(it.Value()))
	}
	if err := it.Err(); err != nil {
		return err
	}
	return rc.json(out)
}

var snapshotCompressions = map[string]wire.SnapshotCompression{
	"Stored": wire.SnapshotStored, "Deflated": wire.SnapshotDeflated, "Bzip2": wire.SnapshotBzip2,
	"Zstd": wire.SnapshotZstd, "Lzma": wire.SnapshotLzma, "Xz": wire.SnapshotXz,
}

var snapshotTypes = map[string]wire.SnapshotType{
	"FilesystemOverview": wire.SnapshotFilesystemOverview, "ProcessList": wire.SnapshotProcessList,
	"ResourceUsage": wire.SnapshotResourceUsage, "Test": wire.SnapshotTest, "ServerLogs": wire.SnapshotServerLogs,
	"ServerConfig": wire.SnapshotServerConfig, "All": wire.SnapshotAll,
}

// enumName is a PascalCase enum value of a body, checked against its names.
type snapshotBody struct {
	Compression   *string   `json:"compression"`
	SnapshotTypes *[]string `json:"snapshot_types"`
}

func (b *snapshotBody) check() error {
	if b.Compression == nil {
		return &shapeError{"missing field `compression`"}
	}
	if b.SnapshotTypes == nil {
		return &shapeError{"missing field `snapshot_types`"}
	}
	if _, ok := snapshotCompressions[*b.Compression]; !ok {
		return &shapeError{"compression: unknown variant `" + *b.Compression + "`"}
	}
	for _, t := range *b.SnapshotTypes {
		if _, ok := snapshotTypes[t]; !ok {
			return &shapeError{"snapshot_types: unknown variant `" + t + "`"}
		}
	}
	return nil
}

func getSnapshot(rc *reqCtx) error {
	var b snapshotBody
	if err := rc.decodeJSON(&b); err != nil {
		return err
	}
	req := wire.GetSnapshot{Compression: snapshotCompressions[*b.Compression]}
	for _, t := range *b.SnapshotTypes {
		req.Types = append(req.Types, byte(snapshotTypes[t]))
	}
	reply, err := rc.do(wire.CodeGetSnapshot, &req)
	if err != nil {
		return err
	}
	h := rc.w.Header()
	h.Set("Content-Type", "application/zip")
	h.Set("Content-Disposition", `attachment; filename="iggy_snapshot_`+rc.api.now().Format("20060102_150405")+`.zip"`)
	rc.w.WriteHeader(http.StatusOK)
	_, _ = rc.w.Write(reply)
	return nil
}

func getClusterMetadata(rc *reqCtx) error {
	reply, err := rc.doEmpty(wire.CodeGetClusterMetadata)
	if err != nil {
		return err
	}
	var m wire.ClusterMetadata
	if err := m.Decode(reply); err != nil {
		return err
	}
	return rc.json(jsonview.ClusterOf(&m))
}

func getClients(rc *reqCtx) error {
	reply, err := rc.doEmpty(wire.CodeGetClients)
	if err != nil {
		return err
	}
	clients, err := wire.AppendClients(nil, reply)
	if err != nil {
		return err
	}
	out := make([]jsonview.Client, len(clients))
	for i := range clients {
		out[i] = jsonview.ClientOf(&clients[i])
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ClientID < out[j].ClientID })
	return rc.json(out)
}

func getClient(rc *reqCtx) error {
	id, err := rc.u32Path("client_id")
	if err != nil {
		return err
	}
	reply, err := rc.do(wire.CodeGetClient, &wire.GetClient{ClientID: id})
	if err != nil {
		return err
	}
	if len(reply) == 0 {
		return errNotFound
	}
	var c wire.ClientDetails
	if err := c.Decode(reply); err != nil {
		return err
	}
	return rc.json(jsonview.ClientDetailsOf(&c))
}
