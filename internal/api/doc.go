// Package api is bootfleet's REST JSON API under /api/v1: machines,
// profiles, images, leases and boot events, with its OpenAPI 3 document at
// /api/v1/openapi.json. The CLI (internal/cli) is a client of it.
//
// Mutating calls need "Authorization: Bearer TOKEN", the token from the
// data directory's api-token file ([LoadOrCreateToken]); reads need it too
// unless Config.OpenReads is set. Bad input always gets a 4xx with a JSON
// body naming the field and the problem ([ErrorBody]), never a 500.
package api
