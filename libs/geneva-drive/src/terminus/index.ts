// geneva-drive/terminus: the health indicator, kept out of the main entry because @nestjs/terminus is an optional peer.
export { GenevaDriveHealthIndicator, type GenevaDriveHealthThresholds } from './geneva-drive.health-indicator.js';
