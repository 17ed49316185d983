// Package redfish is the power driver for BMCs that speak DMTF Redfish:
// it finds the machine's ComputerSystem from the service root, posts
// ComputerSystem.Reset with a ResetType the system allows, and reads
// PowerState back. codec.go decodes the few resources it needs (pure);
// client.go is the HTTPS transport; redfish.go maps bootfleet's actions.
// No maintained Go Redfish library could be had from the Go module proxy
// here, and these three calls are small enough to own.
package redfish
