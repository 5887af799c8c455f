package wire

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestLoginRegisterGolden(t *testing.T) {
	tests := []struct {
		file string
		r    LoginRegister
	}{
		{"requests/login_register.hex", LoginRegister{
			Version: goSDKVersionInfo(), Username: []byte("iggy"), Password: []byte("iggy"),
		}},
		{"requests/login_register_context.hex", LoginRegister{
			Version:  ClientVersionInfo{ProtocolVersion: ServerProtocolVersion, SDKName: []byte("rust-sdk"), SDKVersion: []byte("0.11.0")},
			Username: []byte("admin"), Password: []byte("secret"), Context: []byte("cli"),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := tt.r.Append(nil)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, tt.file, got)
			var dec LoginRegister
			if err := dec.Decode(readGolden(t, tt.file)); err != nil {
				t.Fatal(err)
			}
			if !loginRegisterEqual(&dec, &tt.r) {
				t.Fatalf("Decode = %+v", dec)
			}
		})
	}
}

func loginRegisterEqual(a, b *LoginRegister) bool {
	return versionInfoEqual(&a.Version, &b.Version) && bytes.Equal(a.Username, b.Username) &&
		bytes.Equal(a.Password, b.Password) && bytes.Equal(a.Context, b.Context)
}

func versionInfoEqual(a, b *ClientVersionInfo) bool {
	return a.ProtocolVersion == b.ProtocolVersion && bytes.Equal(a.SDKName, b.SDKName) &&
		bytes.Equal(a.SDKVersion, b.SDKVersion)
}

func TestLoginRegisterWithPATGolden(t *testing.T) {
	r := LoginRegisterWithPAT{Version: goSDKVersionInfo(), Token: []byte("tok-123")}
	got, err := r.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "requests/login_register_with_pat.hex", got)
	var dec LoginRegisterWithPAT
	if err := dec.Decode(readGolden(t, "requests/login_register_with_pat.hex")); err != nil {
		t.Fatal(err)
	}
	if !versionInfoEqual(&dec.Version, &r.Version) || string(dec.Token) != "tok-123" || len(dec.Context) != 0 {
		t.Fatalf("Decode = %+v", dec)
	}
}

func TestLoginDecodePrefixes(t *testing.T) {
	body := readGolden(t, "requests/login_register.hex")
	var r LoginRegister
	for cut := 0; cut < len(body); cut++ {
		if err := r.Decode(body[:cut]); !errors.Is(err, ErrInvalidCommand) {
			t.Fatalf("prefix %d: %v", cut, err)
		}
	}
	// Bytes after the context are ignored, as the reference's decode_from does.
	if err := r.Decode(append(bytes.Clone(body), 0)); err != nil || string(r.Username) == "" {
		t.Fatalf("trailing byte: %+v, %v", r, err)
	}
	// A context length larger than the body is refused before anything is sized by it.
	huge := append(bytes.Clone(body[:len(body)-4]), 0xff, 0xff, 0xff, 0xff)
	if err := r.Decode(huge); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("huge context: %v", err)
	}
	// A password that is not UTF-8.
	badPassword := bytes.Clone(body)
	badPassword[len(body)-5] = 0xff
	if err := r.Decode(badPassword); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("non-UTF-8 password: %v", err)
	}
	pat := readGolden(t, "requests/login_register_with_pat.hex")
	var p LoginRegisterWithPAT
	for cut := 0; cut < len(pat); cut++ {
		if err := p.Decode(pat[:cut]); !errors.Is(err, ErrInvalidCommand) {
			t.Fatalf("PAT prefix %d: %v", cut, err)
		}
	}
}

// The register decision inputs of the reference (apache/iggy core/server/src/auth.rs).
func TestDecodeRegisterBodyShapes(t *testing.T) {
	info := goSDKVersionInfo()
	emptyPassword, err := (&LoginRegister{Version: info, Username: []byte("root"), Password: nil}).Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name          string
		body          []byte
		wantErr       bool
		password, pat bool
	}{
		{name: "password body", body: readGolden(t, "requests/login_register.hex"), password: true},
		{name: "token body", body: readGolden(t, "requests/login_register_with_pat.hex"), pat: true},
		// The quirk: an empty password also reads as a token body ("root" as token).
		{name: "empty password", body: emptyPassword, password: true, pat: true},
		{name: "prefix only", body: readGolden(t, "requests/client_version_info.hex")},
		{name: "no prefix", body: []byte{0, 0x2c, 0, 0, 0}, wantErr: true},
		{name: "empty", body: nil, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rb, err := DecodeRegisterBody(tt.body)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidCommand) {
					t.Fatalf("err = %v, want %v", err, ErrInvalidCommand)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rb.HasPassword != tt.password || rb.HasToken != tt.pat {
				t.Fatalf("HasPassword=%v HasToken=%v; want %v %v", rb.HasPassword, rb.HasToken, tt.password, tt.pat)
			}
			if !versionInfoEqual(&rb.Version, &info) {
				t.Fatalf("version = %+v", rb.Version)
			}
		})
	}
	rb, _ := DecodeRegisterBody(emptyPassword)
	if string(rb.Token.Token) != "root" || rb.Password.CredentialsInRange() {
		t.Fatalf("empty password body: token %q, in range %v", rb.Token.Token, rb.Password.CredentialsInRange())
	}
}

func TestCredentialsInRange(t *testing.T) {
	tests := []struct {
		user, pass int
		want       bool
	}{
		{3, 3, true}, {50, 100, true}, {2, 3, false}, {51, 3, false}, {3, 2, false}, {3, 101, false},
	}
	for _, tt := range tests {
		r := LoginRegister{Username: make([]byte, tt.user), Password: make([]byte, tt.pass)}
		if got := r.CredentialsInRange(); got != tt.want {
			t.Errorf("user %d pass %d: %v", tt.user, tt.pass, got)
		}
	}
}

func TestLoginAppendRefuses(t *testing.T) {
	info := goSDKVersionInfo()
	bad := []LoginRegister{
		{Version: info, Username: nil, Password: []byte("p")},
		{Version: info, Username: []byte("u"), Password: make([]byte, 256)},
		{Version: info, Username: []byte("u"), Password: []byte{0xff}},
		{Version: info, Username: []byte("u"), Context: []byte{0xff}},
		{Version: ClientVersionInfo{}, Username: []byte("u")},
	}
	for i := range bad {
		if b, err := bad[i].Append([]byte{1}); !errors.Is(err, ErrInvalidCommand) || len(b) != 1 {
			t.Errorf("bad[%d]: % x, %v", i, b, err)
		}
	}
	if _, err := (&LoginRegisterWithPAT{Version: info, Token: make([]byte, 256)}).Append(nil); !errors.Is(err, ErrInvalidCommand) {
		t.Errorf("long token: %v", err)
	}
}

func TestLoginRegisterReplyGolden(t *testing.T) {
	r := LoginRegisterReply{UserID: 0, Session: 5, ServerProtocolVersion: ServerProtocolVersion, ServerVersion: []byte("0.11.0")}
	got, err := r.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "requests/login_register_reply.hex", got)
	if len(got) != LoginRegisterReplyFixedBytes+len(r.ServerVersion) {
		t.Errorf("size %d", len(got))
	}
	var dec LoginRegisterReply
	golden := readGolden(t, "requests/login_register_reply.hex")
	if err := dec.Decode(golden); err != nil || dec.Session != 5 || dec.ServerProtocolVersion != ServerProtocolVersion || string(dec.ServerVersion) != "0.11.0" {
		t.Fatalf("Decode = %+v, %v", dec, err)
	}
	zero := bytes.Clone(golden)
	copy(zero[4:12], make([]byte, 8))
	if err := dec.Decode(zero); !errors.Is(err, ErrInvalidSession) {
		t.Fatalf("zero session: %v", err)
	}
	if err := dec.Decode(golden[:len(golden)-1]); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("short: %v", err)
	}
	if _, err := (&LoginRegisterReply{ServerVersion: []byte("v")}).Append(nil); !errors.Is(err, ErrInvalidSession) {
		t.Fatalf("Append zero session: %v", err)
	}
	// Framed as the server sends it: the success section, then the payload.
	framed, _ := r.Append(AppendResultSuccess(nil))
	payload, result, err := SplitResult(framed)
	if err != nil || result != 0 || !bytes.Equal(payload, golden) {
		t.Fatalf("SplitResult = % x, %v, %v", payload, result, err)
	}
}

func FuzzLoginBodies(f *testing.F) {
	for _, name := range []string{
		"requests/login_register.hex", "requests/login_register_context.hex",
		"requests/login_register_with_pat.hex", "requests/client_version_info.hex",
		"requests/login_register_reply.hex",
	} {
		f.Add(readGolden(f, name))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if c, n, err := DecodeClientVersionInfo(body); err == nil {
			re, aerr := c.Append(nil)
			if aerr != nil || !bytes.Equal(re, body[:n]) {
				t.Fatalf("ClientVersionInfo does not re-encode: %v", aerr)
			}
		}
		rb, err := DecodeRegisterBody(body)
		var lr LoginRegister
		if lr.Decode(body) == nil {
			if err != nil || !rb.HasPassword {
				t.Fatal("strict password decode succeeded where the probe failed")
			}
			re, aerr := lr.Append(nil)
			if aerr != nil || !bytes.Equal(re, body) {
				t.Fatalf("LoginRegister does not re-encode: %v", aerr)
			}
		}
		var pat LoginRegisterWithPAT
		if pat.Decode(body) == nil {
			if err != nil || !rb.HasToken {
				t.Fatal("strict token decode succeeded where the probe failed")
			}
			re, aerr := pat.Append(nil)
			if aerr != nil || !bytes.Equal(re, body) {
				t.Fatalf("LoginRegisterWithPAT does not re-encode: %v", aerr)
			}
		}
		switch d := DecideRegister(body, AcceptedProtocolWindow, &testAccounts{}); d.Reason {
		case EvictionReserved, EvictionInvalidCredentials, EvictionInvalidToken, EvictionUserInactive,
			EvictionIncompatibleProtocol, EvictionMalformedLogin:
		default:
			t.Fatalf("DecideRegister answered reason %v", d.Reason)
		}
		var reply LoginRegisterReply
		if reply.Decode(body) == nil {
			re, aerr := reply.Append(nil)
			if aerr != nil || !bytes.Equal(re, body) {
				t.Fatalf("LoginRegisterReply does not re-encode: %v", aerr)
			}
		}
	})
}

func BenchmarkDecodeLoginRegister(b *testing.B) {
	body := readGolden(b, "requests/login_register.hex")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var r LoginRegister
	for b.Loop() {
		if err := r.Decode(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeRegisterBody is what the server runs per register: the prefix plus
// both shape probes. Compare with BenchmarkDecodeLoginRegister (one strict decode).
func BenchmarkDecodeRegisterBody(b *testing.B) {
	body := readGolden(b, "requests/login_register.hex")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if rb, err := DecodeRegisterBody(body); err != nil || !rb.HasPassword {
			b.Fatal(err)
		}
	}
}

// testAccounts knows user "root"/"secret" (id 0), token "tok-123" (user 7) and the
// token "sleepy" of an inactive user.
type testAccounts struct{ passwordChecks int }

func (a *testAccounts) CheckPassword(username, password []byte) (uint32, bool) {
	a.passwordChecks++
	return 0, string(username) == "root" && string(password) == "secret"
}

func (a *testAccounts) CheckToken(token []byte) (uint32, EvictionReason) {
	switch string(token) {
	case "tok-123":
		return 7, EvictionReserved
	case "sleepy":
		return 0, EvictionUserInactive
	}
	return 0, EvictionInvalidToken
}

func TestDecideRegister(t *testing.T) {
	info := goSDKVersionInfo()
	password := func(user, pass string) []byte {
		return reqMust((&LoginRegister{Version: info, Username: []byte(user), Password: []byte(pass)}).Append(nil))
	}
	token := func(tok string) []byte {
		return reqMust((&LoginRegisterWithPAT{Version: info, Token: []byte(tok)}).Append(nil))
	}
	old := goSDKVersionInfo()
	old.ProtocolVersion, _ = PackProtocolVersion(0, 10, 0)
	oldBody := reqMust((&LoginRegister{Version: old, Username: []byte("root"), Password: []byte("secret")}).Append(nil))

	tests := []struct {
		name       string
		body       []byte
		wantUser   uint32
		wantReason EvictionReason
		checks     int // CheckPassword calls
	}{
		{name: "password ok", body: password("root", "secret"), checks: 1},
		{name: "wrong password", body: password("root", "nope"), wantReason: EvictionInvalidCredentials, checks: 1},
		{name: "username too short", body: password("ro", "secret"), wantReason: EvictionInvalidCredentials},
		{name: "password too long", body: password("root", strings.Repeat("p", 101)), wantReason: EvictionInvalidCredentials},
		// As in the reference: an empty password also reads as a token body ("root"),
		// whose check fails with reason 10.
		{name: "empty password", body: password("root", ""), wantReason: EvictionInvalidToken},
		{name: "token ok", body: token("tok-123"), wantUser: 7},
		{name: "token unknown", body: token("forged"), wantReason: EvictionInvalidToken},
		{name: "token of inactive user", body: token("sleepy"), wantReason: EvictionUserInactive},
		{name: "old protocol", body: oldBody, wantReason: EvictionIncompatibleProtocol},
		{name: "no prefix", body: []byte{1, 2, 3}, wantReason: EvictionMalformedLogin},
		{name: "prefix only", body: readGolden(t, "requests/client_version_info.hex"), wantReason: EvictionMalformedLogin},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			accounts := &testAccounts{}
			got := DecideRegister(tt.body, AcceptedProtocolWindow, accounts)
			if got.Reason != tt.wantReason || got.UserID != tt.wantUser || got.LoggedIn() != (tt.wantReason == 0) {
				t.Fatalf("DecideRegister = %+v, want user %d reason %v", got, tt.wantUser, tt.wantReason)
			}
			if accounts.passwordChecks != tt.checks {
				t.Fatalf("CheckPassword called %d times, want %d", accounts.passwordChecks, tt.checks)
			}
			if got.Reason != EvictionMalformedLogin && !versionInfoEqual(&got.Version, &info) && tt.name != "old protocol" {
				t.Fatalf("version = %+v", got.Version)
			}
		})
	}
}
