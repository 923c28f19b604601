// The JSON-RPC methods of A2A 0.3 and 1.0, named once (docs/a2a.md "Relay"): the canonical operation a
// method is (a bounded metric label; both versions' spellings map to one), and which operations stream.

const OPERATIONS: Readonly<Record<string, string>> = {
  'message/send': 'message/send',
  SendMessage: 'message/send',
  'message/stream': 'message/stream',
  SendStreamingMessage: 'message/stream',
  'tasks/get': 'tasks/get',
  GetTask: 'tasks/get',
  'tasks/list': 'tasks/list',
  ListTasks: 'tasks/list',
  'tasks/cancel': 'tasks/cancel',
  CancelTask: 'tasks/cancel',
  'tasks/resubscribe': 'tasks/resubscribe',
  SubscribeToTask: 'tasks/resubscribe',
  'tasks/pushNotificationConfig/set': 'tasks/pushNotificationConfig/set',
  CreateTaskPushNotificationConfig: 'tasks/pushNotificationConfig/set',
  'tasks/pushNotificationConfig/get': 'tasks/pushNotificationConfig/get',
  GetTaskPushNotificationConfig: 'tasks/pushNotificationConfig/get',
  'tasks/pushNotificationConfig/list': 'tasks/pushNotificationConfig/list',
  ListTaskPushNotificationConfigs: 'tasks/pushNotificationConfig/list',
  'tasks/pushNotificationConfig/delete': 'tasks/pushNotificationConfig/delete',
  DeleteTaskPushNotificationConfig: 'tasks/pushNotificationConfig/delete',
  'agent/getAuthenticatedExtendedCard': 'agent/getAuthenticatedExtendedCard',
  GetExtendedAgentCard: 'agent/getAuthenticatedExtendedCard',
};

/** The operation a body's `method` names (either version's spelling); `unknown` for anything else. */
export function operationOf(method: unknown): string {
  return typeof method === 'string' && Object.hasOwn(OPERATIONS, method) ? OPERATIONS[method]! : 'unknown';
}

/** The operations answered with an SSE stream, relayed live and with no deadline after the upstream's headers. */
export function streams(operation: string): boolean {
  return operation === 'message/stream' || operation === 'tasks/resubscribe';
}
