// Types of bench/mock-answer.mjs for the TypeScript that imports it (bench/inproc.ts, bench/stream-edits.ts).
export declare const CREATED: number;
export declare const CHAT_COMPLETION: Record<string, unknown>;
export declare function chunkJson(i: number, fingerprint: string, chunks: number): string;
export declare const USAGE_CHUNK: Record<string, unknown>;
