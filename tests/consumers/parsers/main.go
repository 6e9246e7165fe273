// The parsers the kubelet and Prometheus run, for tests/consumers/test_parsers.py: one "KIND<TAB>VALUE" per line on
// stdin, one verdict per line on stdout. image: "ok<TAB>tag<TAB>digest" or "error<TAB>message", from
// reference.ParseNormalizedNamed with sha256/sha512 registered (k8s.io/kubernetes v1.35.4 pkg/util/parsers
// ParseImageName); duration: "ok" or "error<TAB>message", from model.ParseDuration.
package main

import (
	"bufio"
	_ "crypto/sha256"
	_ "crypto/sha512"
	"fmt"
	"os"
	"strings"

	"github.com/distribution/reference"
	"github.com/prometheus/common/model"
)

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		kind, value, _ := strings.Cut(in.Text(), "\t")
		switch kind {
		case "image":
			named, err := reference.ParseNormalizedNamed(value)
			if err != nil {
				fmt.Fprintf(out, "error\t%v\n", err)
				continue
			}
			tag, digest := "", ""
			if tagged, ok := named.(reference.Tagged); ok {
				tag = tagged.Tag()
			}
			if digested, ok := named.(reference.Digested); ok {
				digest = digested.Digest().String()
			}
			fmt.Fprintf(out, "ok\t%s\t%s\n", tag, digest)
		case "duration":
			if _, err := model.ParseDuration(value); err != nil {
				fmt.Fprintf(out, "error\t%v\n", err)
			} else {
				fmt.Fprintln(out, "ok")
			}
		default:
			fmt.Fprintf(out, "error\tunknown kind %q\n", kind)
		}
	}
}
