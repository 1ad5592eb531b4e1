export { GenevaDriveTesting } from './geneva-drive-testing.js';
export { ManualQueueAdapter } from '../queue/manual-queue.adapter.js';
