package shim

// LateSandboxKeep is lateSandboxKeep, for the tests that step a fake clock
// past it.
const LateSandboxKeep = lateSandboxKeep
