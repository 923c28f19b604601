// Types of bench/mock-answer.mjs for the TypeScript that imports it (bench/inproc.ts).
export declare const CREATED: number;
export declare const CHAT_COMPLETION: Record<string, unknown>;
