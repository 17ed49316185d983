// Package ipmisim runs Debian's IPMI BMC simulator, ipmi_sim (openipmi),
// for tests of the ipmi power driver and the VM tests that power QEMU
// through it. It imports only the standard library, so the e2e module can
// use it without the rest of testutil's dependencies.
package ipmisim
