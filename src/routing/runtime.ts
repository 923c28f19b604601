// Runtime state of models, keyed by resource id so it survives reloads: health rows for `/status/models`
// and the `aisix_deployment_state` gauge.
import type { Model } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';

export interface ModelStatusRow {
  id: string;
  display_name: string;
  kind: 'direct' | 'routing';
  status: 'healthy' | 'cooldown' | 'unhealthy' | 'not_applicable';
  cooldown_until?: { secs_since_epoch: number; nanos_since_epoch: number };
  last_checked_at?: { secs_since_epoch: number; nanos_since_epoch: number };
  last_check_status?: number;
  status_reason?: string;
}

export class ModelRuntime {
  constructor(readonly now: () => Date) {}

  /** Drop state of models that are no longer configured. */
  retain(_snapshot: Snapshot): void {}

  statusRow(m: Model): ModelStatusRow {
    return { id: m.id, display_name: m.display_name, kind: m.kind, status: m.kind === 'routing' ? 'not_applicable' : 'healthy' };
  }

  statusRows(snapshot: Snapshot): ModelStatusRow[] {
    return snapshot.resources.models.map((m) => this.statusRow(m));
  }

  deploymentStates(snapshot: Snapshot): { labels: [string, string, string, string]; value: number }[] {
    const out: { labels: [string, string, string, string]; value: number }[] = [];
    for (const m of snapshot.resources.models) {
      if (m.kind !== 'direct') continue;
      const key = snapshot.providerKeys.get(m.provider_key_id);
      out.push({ labels: [m.provider ?? key?.provider ?? '', m.display_name, m.model_name, m.provider_key_id], value: 0 });
    }
    return out;
  }
}
