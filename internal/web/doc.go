// Package web serves the dashboard: one page, its script and style sheet,
// embedded in the binary (no CDN, works offline on an isolated boot LAN).
// The page reads everything through the REST API (/api/v1) every 2 s and
// sends the API token, kept in the browser's localStorage, when it has
// one; it says so when reads or actions need a token it lacks.
package web
