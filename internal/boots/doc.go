// Package boots tracks each machine's boot from its first DHCP packet to
// the moment the booted OS reports completion, so that bootfleet can say how
// long a boot took. The telemetry issue grows this into full timelines.
package boots
