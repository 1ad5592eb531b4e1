import { Module } from '@nestjs/common';
import { ContractDeadlineWorkflow, ContractWorkflow } from './contract.workflow.js';
import { ContractsController } from './contracts.controller.js';
import { ContractsService } from './contracts.service.js';

@Module({
  controllers: [ContractsController],
  providers: [ContractsService, ContractWorkflow, ContractDeadlineWorkflow],
})
export class ContractsModule {}
