/** The layers of the library's top-level folders and root files, lowest first (see check-layers.mjs). */
export declare const LAYERS: ReadonlyArray<readonly string[]>;

/** The upward imports and import circles under `src` (the library's sources unless told), one sentence each. */
export declare function check(src?: string): string[];
