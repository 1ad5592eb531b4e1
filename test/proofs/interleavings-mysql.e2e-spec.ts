/** The interleavings proof (src/interleavings-suite.ts) on MySQL/MariaDB: a file of its own, run beside the other database's. */
import { interleavingsSuite } from './src/interleavings-suite.js';

interleavingsSuite('mysql');
