// Package readorder keeps, per image content, the order in which real
// boots first read its chunks, so an agent can ask the multicast group
// for what the boot will read next before the kernel asks for it.
//
// The codec (Encode, Decode) is pure; a Learner notes first reads as the
// server sees them and keeps each content's order in a file of the data
// directory, written atomically.
package readorder
