package segment

import "strconv"

// LogDirs are the directories of a partition directory that hold a log's files,
// relative to it: the directory itself (segments and their indexes) and the two
// tables of consumer offsets.
var LogDirs = [...]string{"", Consumer.dir(), ConsumerGroup.dir()}

// IsLogFile reports whether the file name in dir (one of LogDirs) is one of a log's
// own files: a segment's .log or .index, or a consumer offset file (its name the
// consumer's id). A partition directory may hold files of others beside them (the
// partition plane's group state, the server's purge record); recovery and a state
// install leave those alone.
func IsLogFile(dir, name string) bool {
	switch dir {
	case "":
		_, log := parseSegmentName(name, ".log")
		_, index := parseSegmentName(name, ".index")
		return log || index
	case Consumer.dir(), ConsumerGroup.dir():
		_, err := strconv.ParseUint(name, 10, 32)
		return err == nil
	}
	return false
}
