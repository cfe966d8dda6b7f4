package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/distribution/reference"

	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/meshctl/meshctl/pkg/lazyre"
)

// Image is a checked image reference.
type Image struct {
	// Ref is the reference as given. The ledger records it, and apply runs
	// it.
	Ref string
	// Normalized is its fully qualified form (docker.io/library/…:latest). It
	// decides whether two records name the same image.
	Normalized string
	// Pinned is true when the reference carries a digest. Only then does it
	// name one image for good. A tag-only reference is accepted, with a
	// warning, since its tag may be moved.
	Pinned bool
}

// ParseImage checks ref as a Docker image reference.
func ParseImage(ref string) (Image, error) {
	if ref == "" {
		return Image{}, badImage(ref, errors.New("it is empty"))
	}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return Image{}, badImage(ref, err)
	}
	if d := reference.Domain(named); strings.Contains(d, ":") {
		if _, port, err := net.SplitHostPort(d); err == nil {
			if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
				return Image{}, badImage(ref, fmt.Errorf("registry port %s is not a port (1 to 65535)", port))
			}
		}
	}
	named = reference.TagNameOnly(named)
	_, pinned := named.(reference.Digested)
	return Image{Ref: ref, Normalized: named.String(), Pinned: pinned}, nil
}

// resultFailed is the result of a build recorded as failed. Conflict messages
// and compact records use it.
const resultFailed = "failed"

// resultHash hashes a result key, what two records of one build must agree
// on. The key is the normalized image, or "failed". A compact record keeps
// only its hash.
func resultHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}

var moduleName = lazyre.New(`^[a-z0-9][a-z0-9-]{0,62}$`)

// CheckModule returns an error unless name is a valid module name.
func CheckModule(name string) error {
	if !moduleName().MatchString(name) {
		return fault.New(fault.BadInput, "module name %q is not valid: use 1 to 63 of a-z, 0-9 and '-', starting with a letter or digit", name)
	}
	return nil
}
