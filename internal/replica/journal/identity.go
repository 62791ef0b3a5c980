package journal

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cellfleet/cellfleet/internal/durable"
)

// IdentityFile is the identity record's name in the data directory.
const IdentityFile = "identity.json"

// Identity says which replica a data directory belongs to.
type Identity struct {
	Volume     string `json:"volume"`
	Replica    string `json:"replica"`
	Generation uint64 `json:"generation"`
	// Floor is the highest checkpoint index this replica has recorded as
	// durable. A journal plus checkpoints that end below it were truncated.
	Floor uint64 `json:"floor"`
	// Sealed is set once the journal exists and before the replica can
	// acknowledge anything. An unsealed record is an initialisation that
	// crashed: nothing was acknowledged, so it is redone.
	Sealed bool `json:"sealed"`
}

type identityFile struct {
	Identity
	Checksum string `json:"checksum"`
}

func (id Identity) sum() string {
	b, _ := json.Marshal(id)
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Errors reading an identity record.
var (
	ErrIdentityMissing = errors.New("identity record missing")
	ErrIdentityCorrupt = errors.New("identity record corrupt or truncated")
)

// ReadIdentity reads and verifies dir's identity record.
func ReadIdentity(dir string) (Identity, error) {
	b, err := os.ReadFile(filepath.Join(dir, IdentityFile))
	if errors.Is(err, os.ErrNotExist) {
		return Identity{}, ErrIdentityMissing
	}
	if err != nil {
		return Identity{}, fmt.Errorf("read identity record: %w", err)
	}
	var f identityFile
	if err := json.Unmarshal(b, &f); err != nil {
		return Identity{}, fmt.Errorf("%w: %v", ErrIdentityCorrupt, err)
	}
	if f.Checksum != f.Identity.sum() {
		return Identity{}, fmt.Errorf("%w: checksum mismatch", ErrIdentityCorrupt)
	}
	return f.Identity, nil
}

// WriteIdentity replaces dir's identity record atomically and durably
// (write, fsync, rename, fsync the directory).
func WriteIdentity(dir string, id Identity) error {
	b, err := json.MarshalIndent(identityFile{Identity: id, Checksum: id.sum()}, "", "  ")
	if err != nil {
		return err
	}
	if err := durable.WriteFile(filepath.Join(dir, IdentityFile), append(b, '\n')); err != nil {
		return fmt.Errorf("write identity record: %w", err)
	}
	return nil
}
