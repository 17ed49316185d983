package sqldb

import (
	"encoding/json"
	"fmt"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// rootFileArgs encodes files: and vars: as their JSON columns; none are
// stored as [] and {}, and read back as nil.
func rootFileArgs(files []inventory.RootFile, vars map[string]string) (string, string, error) {
	if files == nil {
		files = []inventory.RootFile{}
	}
	if vars == nil {
		vars = map[string]string{}
	}
	f, err := jsonArg(files)
	if err != nil {
		return "", "", err
	}
	v, err := jsonArg(vars)
	return f, v, err
}

func scanRootFiles(files, vars string, fs *[]inventory.RootFile, vs *map[string]string) error {
	if err := json.Unmarshal([]byte(files), fs); err != nil {
		return fmt.Errorf("stored files: %w", err)
	}
	if err := json.Unmarshal([]byte(vars), vs); err != nil {
		return fmt.Errorf("stored vars: %w", err)
	}
	if len(*fs) == 0 {
		*fs = nil
	}
	if len(*vs) == 0 {
		*vs = nil
	}
	return nil
}
