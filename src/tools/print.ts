// How the command-line tools write: a report to stderr line by line, the one result line to stdout.
import type { Platform } from '../platform.ts';

/** Each line of a multi-line report to stderr as-is (reports are meant for a person). */
export function printErr(p: Platform, text: string): void {
  for (const line of text.split('\n')) p.writeLog(line);
}

/** One line to stdout, or to the log where the runtime has no stdout. */
export function printOut(p: Platform, line: string): void {
  if (p.writeOut) p.writeOut(`${line}\n`);
  else p.writeLog(line);
}
