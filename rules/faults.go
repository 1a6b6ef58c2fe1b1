package rules

// faultPoint marks a moment a crash test kills preceptd at. It does
// nothing unless the binary is built with the faultinject tag
// (fault_inject.go); production builds never pause.
var faultPoint = func(name string) {}
