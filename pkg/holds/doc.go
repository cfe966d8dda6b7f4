// Package holds is the record of maintenance windows that apply and window
// share: which containers a window holds stopped, whether that window is
// still alive, and the history of closed windows.
//
// The holds file (holds.json) and the history (windows-history.json) are
// changed only under the state lock. A window is alive while its process
// holds the OS lock "window-<id>" (a file window-<id>.lock in the state
// directory) for its whole life, or while its step container still runs in
// the engine (a run: step's container can outlive a SIGKILLed window and go
// on sweeping), or while a process of its exec: step's process group runs. A hold whose window is neither is stale, and the next apply or
// window releases it. A dead window whose step container the engine cannot
// see (it does not answer) reads unknown, and its hold stays (fail closed).
package holds
