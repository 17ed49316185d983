// Package power switches machines on and off through their drivers:
// Wake-on-LAN (wol.go, over package wol), IPMI (package power/ipmi) and
// Redfish (package power/redfish). It owns the [Driver] contract, the
// wave plan that keeps an admin from starting a storm by accident
// (wave.go) and the runner that carries a command out over many machines,
// one error per machine, the rest going on (run.go).
package power
