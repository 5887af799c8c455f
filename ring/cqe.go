package ring

import "golang.org/x/sys/unix"

// Err returns the operation's error: nil when Res >= 0, otherwise the
// negated errno the kernel put in Res. Common ones: ECANCELED (cancelled, or
// a link before it failed), ETIME (a timeout fired), ENOBUFS (the provided
// buffer group was empty), ENOENT (cancel or timeout remove found nothing).
// EFAULT and EINVAL on a well-formed SQE are bugs of the caller or of this
// package: a bad address or a stray field.
func (c CQE) Err() error {
	if c.Res >= 0 {
		return nil
	}
	return unix.Errno(-c.Res)
}

// More reports whether the SQE behind this CQE stays armed and will post
// more CQEs (multishot accept and recv, the first CQE of send_zc).
func (c CQE) More() bool { return c.Flags&CQEFMore != 0 }

// Notif reports whether this is a send_zc notification: the kernel no longer
// reads the sent buffer.
func (c CQE) Notif() bool { return c.Flags&CQEFNotif != 0 }

// SockNonempty reports whether more data was waiting on the socket after a
// recv.
func (c CQE) SockNonempty() bool { return c.Flags&CQEFSockNonempty != 0 }

// BufferID returns the id of the provided buffer the kernel picked for a
// recv with buffer select, and whether there is one (CQEFBuffer).
func (c CQE) BufferID() (uint16, bool) {
	if c.Flags&CQEFBuffer == 0 {
		return 0, false
	}
	return uint16(c.Flags >> cqeBufferShift), true
}
