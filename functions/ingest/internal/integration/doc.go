// Package integration holds ingest's end-to-end tests (test files only):
// real HTTP through the local front, the real handler, the real SDK against
// dynalite and fauxqs.
package integration
