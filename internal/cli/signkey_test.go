package cli_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/internal/cli"
)

// A signing key given in a form tunefleet does not take — its base64 body
// without the PEM armour, in $TUNEFLEET_SIGN_KEY or --sign-key, or a file
// holding that body — is refused as what it is ("not a PEM private key"),
// exit 2, and no output repeats any of its bytes: the variable comes from
// a Secret, and the message lands in pod and CI logs.
func TestSignKeyNeverPrinted(t *testing.T) {
	needORT(t)
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	body := base64.StdEncoding.EncodeToString(der)
	armoured := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	dir := t.TempDir()
	bodyFile := filepath.Join(dir, "body.key")
	if err := os.WriteFile(bodyFile, []byte(body+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := []string{"run", "--queues", "cpu", "--redis", "redis://127.0.0.1:1", "--store", "file://" + dir}
	for _, tc := range []struct {
		name, env string
		flag      []string
		want      []string
	}{
		{name: "body in the variable", env: body, want: []string{"$" + cli.SignKeyEnv + " is not a PEM private key nor a file that can be read"}},
		{name: "body in the flag", flag: []string{"--sign-key", body}, want: []string{"--sign-key is not a PEM private key nor a file that can be read"}},
		{name: "file holding the body", flag: []string{"--sign-key", bodyFile}, want: []string{"no PEM block"}},
		{name: "armour broken in the variable", env: strings.Replace(armoured, "-----END", "", 1), want: []string{"$" + cli.SignKeyEnv + " holds a PEM block that is not a usable signing key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(cli.SignKeyEnv, tc.env)
			o := worker(t, append(append([]string{}, run...), tc.flag...)...)
			o.wantError(t, "worker", cli.ExitUsage, tc.want...)
			// Neither the body nor any 16-character stretch of it.
			for i := 0; i+16 <= len(body); i += 8 {
				if piece := body[i : i+16]; strings.Contains(o.stdout+o.stderr, piece) {
					t.Fatalf("the output repeats the key (%q): %s", piece, o)
				}
			}
		})
	}
}
