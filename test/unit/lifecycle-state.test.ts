// The lifecycle diagram as a unit: every legal transition moves the phase, every other one throws naming
// from → to and leaves the phase where it was.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { IllegalTransition, Lifecycle, type Phase, TRANSITIONS } from '../../src/lifecycle/state.ts';
import { listenForSignals } from '../../src/lifecycle/signals.ts';
import type { Platform, SignalName } from '../../src/platform.ts';

const PHASES: Phase[] = ['starting', 'waiting', 'serving', 'draining', 'stopped'];

/** The shortest legal path from `starting` to each phase. */
const PATH: Record<Phase, Phase[]> = {
  starting: [],
  waiting: ['waiting'],
  serving: ['serving'],
  draining: ['serving', 'draining'],
  stopped: ['serving', 'draining', 'stopped'],
};

function move(lc: Lifecycle, to: Phase): void {
  switch (to) {
    case 'starting':
      throw new IllegalTransition(lc.phase, to); // no method leads back to starting
    case 'waiting':
      return lc.waitForConfig();
    case 'serving':
      return lc.serve();
    case 'draining':
      return lc.beginDrain(0);
    case 'stopped':
      return lc.stop();
  }
}

function at(phase: Phase): Lifecycle {
  const lc = new Lifecycle();
  for (const p of PATH[phase]) move(lc, p);
  assert.equal(lc.phase, phase);
  return lc;
}

describe('lifecycle diagram', () => {
  test('the legal transitions are exactly those of the diagram', () => {
    assert.deepEqual(TRANSITIONS, {
      starting: ['waiting', 'serving', 'stopped'],
      waiting: ['serving', 'stopped'],
      serving: ['draining'],
      draining: ['stopped'],
      stopped: [],
    });
  });

  for (const from of PHASES) {
    for (const to of PHASES) {
      const legal = TRANSITIONS[from].includes(to);
      test(`${from} → ${to}: ${legal ? 'legal' : 'refused'}`, () => {
        const lc = at(from);
        if (legal) {
          move(lc, to);
          assert.equal(lc.phase, to);
        } else {
          assert.throws(() => move(lc, to), (e: unknown) => {
            assert.ok(e instanceof IllegalTransition);
            assert.equal(e.message, `illegal lifecycle transition: ${from} → ${to}`);
            return true;
          });
          assert.equal(lc.phase, from, 'a refused transition leaves the phase');
        }
      });
    }
  }

  test('draining is true from the drain on; the drain facts start with it', () => {
    const lc = at('serving');
    assert.equal(lc.draining, false);
    const before = lc.drain;
    lc.beginDrain(7);
    assert.equal(before, undefined);
    assert.equal(lc.draining, true);
    assert.equal(lc.drain?.minDrainSecs, 7);
    lc.stop();
    assert.equal(lc.draining, true);
  });

  test('a second drain is refused and keeps the first drain facts', () => {
    const lc = at('draining');
    const first = lc.drain;
    assert.throws(() => lc.beginDrain(1), /draining → draining/);
    assert.equal(lc.drain, first);
  });
});

describe('listenForSignals: one handler per signal for the process life', () => {
  test('the first SIGTERM/SIGINT stops; later ones go to onRepeat; SIGHUP to the reload installed', async () => {
    const handlers = new Map<SignalName, (() => void)[]>();
    const platform = {
      onSignal: (s: SignalName, h: () => void) => handlers.set(s, [...(handlers.get(s) ?? []), h]),
    } as unknown as Platform;
    const send = (s: SignalName) => handlers.get(s)?.forEach((h) => h());
    const signals = listenForSignals(platform);
    assert.deepEqual([...handlers.keys()].sort(), ['SIGHUP', 'SIGINT', 'SIGTERM']);
    const hups: string[] = [];
    send('SIGHUP'); // nothing installed yet: ignored
    signals.onHup(() => hups.push('reload'));
    send('SIGHUP');
    assert.deepEqual(hups, ['reload']);
    const repeats: SignalName[] = [];
    send('SIGINT'); // before any onRepeat: the first stop signal
    signals.onRepeat((s) => repeats.push(s));
    send('SIGTERM');
    send('SIGINT');
    assert.equal(await signals.stopped, 'SIGINT');
    assert.equal(signals.stopRequested, 'SIGINT');
    assert.deepEqual(repeats, ['SIGTERM', 'SIGINT']);
    // Registering never adds handlers after the start: each signal still has exactly one.
    for (const hs of handlers.values()) assert.equal(hs.length, 1);
  });
});
