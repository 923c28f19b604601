// The gateway's one clock: milliseconds since the epoch. Every module that needs the time takes a `Clock`,
// so a test can inject its own; nothing else in src/ reads the wall clock.
export type Clock = () => number;

export const systemClock: Clock = () => Date.now();
